#!/usr/bin/python3
"""Pythia-style, CRFM-style, LLaMA-style (grouped-query, tied, llama3 rope, sharded .bin)
and OLMo-2-style (q/k norms, sharded safetensors) checkpoint series through the real
`anisoscope submit` and `anisoscope query` against the real server, compared with the
float64 reference (tests/reference, written from the Hugging Face GPTNeoX / GPT-2 / Llama /
Olmo2 definitions); and a text probe through Pythia's own byte-level BPE tokenizer when
the fixture has tokenizer.json."""
import hashlib
import json
import os
import shutil
import tempfile
import unittest

from server_process import ServerProcess

FIXTURE = os.path.join(os.environ.get("ANISOSCOPE_FIXTURES", "fixtures"), "causal_runs")
STEPS = [0, 100, 200, 300]
SUITES = {"pythia": ("gpt_neox", "step{}"), "crfm": ("gpt2", "checkpoint-{}"),
          "llama": ("llama", "step{}"), "olmo2": ("olmo2", "stage1-step{}-tokens2M"),
          "llama_linear_rope": ("llama", "step{}")}
ABSOLUTE = ("qk_mean_cosine", "attn_entropy", "q_anisotropy", "k_anisotropy")
RELATIVE = ("q_mean_norm", "k_mean_norm", "qk_mean_dot")
TEXT = ("The tower is 324 metres (1,063 ft) tall, about the same height as an 81-storey "
        "building, and the tallest structure in Paris. Its base is square, measuring 125 "
        "metres on each side. During its construction it surpassed the Washington Monument "
        "to become the tallest man-made structure in the world, a title it held for 41 years. "
        "Don't you think it's café-worthy?  Ünïcödé — “quotes” and   runs of spaces.\n"
        ) * 6


def reference(suite, step):
    name = SUITES[suite][1].format(step) + ".json"
    with open(os.path.join(FIXTURE, "reference", suite, name)) as f:
        return json.load(f)


class CausalEndToEndTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        assert os.path.exists(os.path.join(FIXTURE, "probe.jsonl")), \
            f"fixture causal_runs missing at {FIXTURE}"
        cls.work = tempfile.mkdtemp(prefix="anisoscope_causal_e2e_")
        cls.server = ServerProcess(os.path.join(cls.work, "metrics.db"),
                                   [FIXTURE, cls.work]).start()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.work, ignore_errors=True)

    def query(self, run, metric, *extra):
        return json.loads(self.server.cli("query", "--run", run, "--metric", metric,
                                          "--format", "json", *extra, check=True).stdout)

    def submit(self, run, suite):
        result = self.server.cli("submit", "--run", run, "--checkpoints",
                                 os.path.join(FIXTURE, suite), "--probe-tokens",
                                 os.path.join(FIXTURE, "probe.jsonl"), "--wait")
        self.assertEqual(result.returncode, 0, result.stderr + self.server.read_log())

    def check_vectors(self, run, suite, kind, layer=2, head=1, heads=4, steps=STEPS):
        vectors = json.loads(self.server.cli("vectors", "--run", run, "--kind", kind,
                                             "--layer", layer, "--head", head,
                                             check=True).stdout)
        self.assertEqual([v["step"] for v in vectors], steps, kind)
        for entry in vectors:
            want = reference(suite, entry["step"])["heads"][layer * heads + head][kind]
            scale = sum(x * x for x in want) ** 0.5
            self.assertEqual(len(entry["values"]), len(want))
            for got, expected in zip(entry["values"], want):
                self.assertLess(abs(got - expected), 1e-3 * scale, (suite, kind, entry["step"]))

    def check_suite_matches_reference(self, suite, steps=STEPS):
        family = SUITES[suite][0]
        self.submit(suite, suite)
        heads = 4
        for metric in ABSOLUTE + RELATIVE:
            points = self.query(suite, metric)
            self.assertEqual(len(points), len(steps) * 3 * heads, metric)
            self.assertEqual(sorted({p["step"] for p in points}), steps, metric)
            for p in points:
                want = reference(suite, p["step"])["heads"][p["layer"] * heads + p["head"]][metric]
                tolerance = 2e-4 if metric in ABSOLUTE else 1e-3 * max(abs(want), 1e-3)
                self.assertLess(abs(p["value"] - want), tolerance, (suite, metric, p))
        for metric, key in (("hidden_anisotropy", "anisotropy"), ("hidden_mean_norm", "mean_norm")):
            points = self.query(suite, metric)
            self.assertEqual(len(points), len(steps) * 4, metric)  # L + 1 hidden states
            for p in points:
                self.assertIsNone(p["head"])
                want = reference(suite, p["step"])["hidden_states"][p["layer"]][key]
                tolerance = 2e-4 if key == "anisotropy" else 1e-3 * abs(want)
                self.assertLess(abs(p["value"] - want), tolerance, (suite, metric, p))
        vector_kinds = ("q_mean", "k_mean")
        if family in ("gpt_neox", "llama", "olmo2"):
            vector_kinds += ("q_mean_pre_rotary", "k_mean_pre_rotary")
        for kind in vector_kinds:
            self.check_vectors(suite, suite, kind, steps=steps)
        self.assertRegex(self.server.cli("runs", check=True).stdout,
                         rf"{suite}\s+{family}\s+3x4")

    def test_pythia_style_series_matches_reference(self):
        self.check_suite_matches_reference("pythia")

    def test_crfm_style_series_matches_reference(self):
        self.check_suite_matches_reference("crfm")

    def test_llama_style_series_matches_reference(self):
        self.check_suite_matches_reference("llama")

    def test_olmo2_style_series_matches_reference(self):
        self.check_suite_matches_reference("olmo2")

    def hf_cache(self, suite):
        """The suite laid out as huggingface_hub caches a repository: refs/REVISION holds a
        commit, snapshots/COMMIT/ links each file into blobs/ (named by its content's hash)."""
        repository = os.path.join(self.work, f"models--anisoscope--{suite}")
        for sub in ("refs", "blobs", "snapshots"):
            os.makedirs(os.path.join(repository, sub), exist_ok=True)
        commit = None
        for step in STEPS:
            revision = SUITES[suite][1].format(step)
            commit = hashlib.sha1(revision.encode()).hexdigest()
            snapshot = os.path.join(repository, "snapshots", commit)
            os.makedirs(snapshot)
            source = os.path.join(FIXTURE, suite, revision)
            for name in os.listdir(source):
                with open(os.path.join(source, name), "rb") as f:
                    blob = hashlib.sha256(f.read()).hexdigest()
                shutil.copy(os.path.join(source, name), os.path.join(repository, "blobs", blob))
                os.symlink(os.path.join("..", "..", "blobs", blob), os.path.join(snapshot, name))
            with open(os.path.join(repository, "refs", revision), "w") as f:
                f.write(commit)
        with open(os.path.join(repository, "refs", "main"), "w") as f:
            f.write(commit)
        return repository

    def test_olmo2_branches_in_a_hugging_face_cache(self):
        repository = self.hf_cache("olmo2")
        result = self.server.cli("submit", "--run", "olmo2_cache", "--hf-cache", repository,
                                 "--probe-tokens", os.path.join(FIXTURE, "probe.jsonl"), "--wait")
        self.assertEqual(result.returncode, 0, result.stderr + self.server.read_log())
        points = self.query("olmo2_cache", "attn_entropy")
        self.assertEqual(sorted({p["step"] for p in points}), STEPS)
        for p in points:
            want = reference("olmo2", p["step"])["heads"][p["layer"] * 4 + p["head"]]
            self.assertLess(abs(p["value"] - want["attn_entropy"]), 2e-4, p)
        plain = self.server.cli("submit", "--run", "not_a_cache", "--hf-cache",
                                os.path.join(FIXTURE, "olmo2"), "--probe-tokens",
                                os.path.join(FIXTURE, "probe.jsonl"))
        self.assertNotEqual(plain.returncode, 0)
        self.assertIn("is not a Hugging Face cache repository", plain.stderr)

    def test_a_step_serving_an_earlier_steps_weights_is_flagged_or_skipped(self):
        suite = os.path.join(FIXTURE, "pythia_duplicate")
        probe = os.path.join(FIXTURE, "probe.jsonl")
        flagged = self.server.cli("submit", "--run", "duplicate", "--checkpoints", suite,
                                  "--probe-tokens", probe, "--wait")
        self.assertEqual(flagged.returncode, 0, flagged.stderr + self.server.read_log())
        self.assertRegex(flagged.stderr,
                         r"step 200 done [0-9.]+ s; WARNING: the same weights as step 100 "
                         r"\(xxh3-128:[0-9a-f]{32}\)")
        self.assertEqual(sorted({p["step"] for p in self.query("duplicate", "attn_entropy")}),
                         [0, 100, 200])
        self.assertRegex(self.server.cli("runs", check=True).stdout,
                         r"\nduplicate\s+gpt_neox\s+3x4\s+probe\.jsonl · .+ \(p[0-9a-f]+\)\s+3\s+0\.\.200\s+200=100\n")
        skipped = self.server.cli("submit", "--run", "deduplicated", "--checkpoints", suite,
                                  "--probe-tokens", probe, "--dedupe", "--wait")
        self.assertEqual(skipped.returncode, 0, skipped.stderr + self.server.read_log())
        self.assertIn("step 200 skipped: the same weights as step 100 (--dedupe)", skipped.stderr)
        self.assertEqual(sorted({p["step"] for p in self.query("deduplicated", "attn_entropy")}),
                         [0, 100])

    def test_llama_linear_rope_scaling_matches_reference(self):
        self.check_suite_matches_reference("llama_linear_rope", steps=[STEPS[-1]])

    def check_text_probe(self, suite):
        """A text probe through each checkpoint's own tokenizer stores every step."""
        text = os.path.join(self.work, f"probe_{suite}.txt")
        with open(text, "w", encoding="utf-8") as f:
            f.write(TEXT)
        run = f"{suite}_text"
        result = self.server.cli("submit", "--run", run, "--checkpoints",
                                 os.path.join(FIXTURE, suite), "--probe-text", text,
                                 "--seq-len", "32", "--wait")
        self.assertEqual(result.returncode, 0, result.stderr + self.server.read_log())
        points = self.query(run, "attn_entropy")
        self.assertEqual(sorted({p["step"] for p in points}), STEPS)
        self.assertTrue(all(p["value"] > 0 for p in points))

    def test_pythia_text_probe_uses_the_checkpoint_tokenizer(self):
        if not os.path.exists(os.path.join(FIXTURE, "pythia", "step0", "tokenizer.json")):
            self.skipTest("no tokenizer.json in the fixture ($ANISOSCOPE_SHARED_DATA absent "
                          "when it was made)")
        self.check_text_probe("pythia")

    def test_llama_text_probe_uses_its_sentencepiece_model(self):
        # The llama checkpoints ship only tokenizer.model (and tokenizer_config.json).
        self.assertEqual(sorted(f for f in os.listdir(os.path.join(FIXTURE, "llama", "step0"))
                                if f.startswith("tokenizer")),
                         ["tokenizer.model", "tokenizer_config.json"])
        self.check_text_probe("llama")

if __name__ == "__main__":
    unittest.main(verbosity=2)
