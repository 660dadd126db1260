// The official Hugging Face Hub client (@huggingface/hub, pinned in package.json) run against
// hub_server.py: what it lists and downloads is written out for hub_server_test.py to check
// byte for byte. Usage: node hub_client_check.mjs PLAN.json  (results as JSON in resultPath)
// PLAN: {hubUrl, outDir, resultPath, repo, revision, commit, smallPath, lfsPath, subdir, owner,
//        gatedRepo, gatedPath, gatedToken, wrongToken (known, not allowed), unknownToken}
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import {
  downloadFile, downloadFileToCacheDir, fileDownloadInfo, fileExists, listFiles, listModels,
  modelInfo,
} from "@huggingface/hub";

const plan = JSON.parse(readFileSync(process.argv[2], "utf8"));
const hubUrl = plan.hubUrl;
const results = {};

async function attempt(name, fn) {
  try {
    results[name] = { ok: await fn() };
  } catch (error) {
    results[name] = {
      error: { name: error.constructor.name, statusCode: error.statusCode ?? null,
               message: String(error.message) },
    };
  }
}

async function collect(iterator) {
  const items = [];
  for await (const item of iterator) items.push(item);
  return items;
}

async function save(blob, relative) {
  const target = join(plan.outDir, relative);
  mkdirSync(dirname(target), { recursive: true });
  writeFileSync(target, Buffer.from(await blob.arrayBuffer()));
  return { file: target, size: blob.size };
}

const repo = plan.repo;
await attempt("listFiles_recursive", () =>
  collect(listFiles({ repo, revision: plan.revision, recursive: true, hubUrl })));
await attempt("listFiles_top", () =>
  collect(listFiles({ repo, revision: plan.revision, hubUrl })));
await attempt("listFiles_subdir_expand", () =>
  collect(listFiles({ repo, revision: plan.revision, path: plan.subdir, expand: true, hubUrl })));
await attempt("listFiles_missing_revision", () =>
  collect(listFiles({ repo, revision: "no-such-branch", hubUrl })));
await attempt("download_small", async () =>
  save(await downloadFile({ repo, path: plan.smallPath, revision: plan.revision, hubUrl }),
       "small"));
await attempt("download_lfs", async () =>
  save(await downloadFile({ repo, path: plan.lfsPath, revision: plan.revision, hubUrl }),
       "lfs"));
await attempt("download_missing", () =>
  downloadFile({ repo, path: "no/such/file", revision: plan.revision, hubUrl }));
await attempt("info_lfs", async () => {
  const info = await fileDownloadInfo({ repo, path: plan.lfsPath, revision: plan.revision,
                                        hubUrl });
  return { etag: info.etag, size: info.size, url: info.url };
});
await attempt("info_small", async () => {
  const info = await fileDownloadInfo({ repo, path: plan.smallPath, revision: plan.revision,
                                        hubUrl });
  return { etag: info.etag, size: info.size, url: info.url };
});
await attempt("exists_small", () =>
  fileExists({ repo, path: plan.smallPath, revision: plan.revision, hubUrl }));
await attempt("exists_missing", () =>
  fileExists({ repo, path: "no/such/file", revision: plan.revision, hubUrl }));
await attempt("listModels", async () =>
  (await collect(listModels({ search: { owner: plan.owner }, hubUrl })))
    .map((m) => ({ name: m.name, private: m.private, gated: m.gated })));
await attempt("modelInfo", async () => {
  const info = await modelInfo({ name: repo, revision: plan.revision, hubUrl,
                                 additionalFields: ["sha", "siblings"] });
  return { name: info.name, sha: info.sha, siblings: info.siblings };
});
await attempt("cache_by_commit", () =>
  downloadFileToCacheDir({ repo, path: plan.lfsPath, revision: plan.commit, hubUrl,
                           cacheDir: join(plan.outDir, "cache") }));
await attempt("gated_no_token", () =>
  downloadFile({ repo: plan.gatedRepo, path: plan.gatedPath, hubUrl }));
await attempt("gated_wrong_token", () =>
  downloadFile({ repo: plan.gatedRepo, path: plan.gatedPath, hubUrl,
                 accessToken: plan.wrongToken }));
await attempt("gated_unknown_token", () =>
  downloadFile({ repo: plan.gatedRepo, path: plan.gatedPath, hubUrl,
                 accessToken: plan.unknownToken }));
await attempt("gated_listing_no_token", () =>
  collect(listFiles({ repo: plan.gatedRepo, recursive: true, hubUrl })));
await attempt("gated_token", async () =>
  save(await downloadFile({ repo: plan.gatedRepo, path: plan.gatedPath, hubUrl,
                            accessToken: plan.gatedToken }), "gated"));
writeFileSync(plan.resultPath, JSON.stringify(results));
