#!/usr/bin/python3
"""Seed corpora of the fuzz targets, written to OUT/<target>/: small valid inputs of each
format (tokenizer.json variants, a tiny SentencePiece model, vocabularies, probes, step
names, torch.save zips) from which libFuzzer mutates. Run by scripts/fuzz.sh with Debian's
python3 (torch for the zips).
Also writes OUT/../weights/<family>/: tiny real checkpoints (train_causal.py's families,
one layer) whose config.json the model_config_fuzzer mutates.
usage: make_seeds.py OUT"""
import argparse
import io
import json
import os
import struct
import sys
import zipfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "fixtures"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))
import hf_io  # noqa: E402
import hostile_checkpoints  # noqa: E402
import train_causal  # noqa: E402


def write(out, target, name, data):
    os.makedirs(os.path.join(out, target), exist_ok=True)
    with open(os.path.join(out, target, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode("utf-8"))


BYTE_LEVEL_VOCAB = {"a": 0, "b": 1, "\u0120": 2, "ab": 3, "aa": 4, "\u0120ab": 5, "\u0120a": 6}
META_VOCAB = {"<unk>": 0, "<s>": 1, "\u2581": 2, "a": 3, "b": 4, "\u2581a": 5, "ab": 6,
              "<0x0A>": 7, "<0xC3>": 8, "<0xA9>": 9}
QWEN_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
              r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def tokenizer_jsons():
    added = [{"id": 7, "content": "<s>", "special": True, "normalized": False},
             {"id": 8, "content": "  ", "special": False, "normalized": True}]
    byte_level = {"added_tokens": added, "normalizer": {"type": "NFC"},
                  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": True},
                  "post_processor": {"type": "ByteLevel"},
                  "model": {"type": "BPE", "vocab": BYTE_LEVEL_VOCAB,
                            "merges": ["a b", "a a", "\u0120 ab", "\u0120 a"]}}
    split = dict(byte_level, pre_tokenizer={"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": QWEN_REGEX}, "behavior": "Isolated",
         "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]})
    template = {"type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                           {"Sequence": {"id": "A", "type_id": 0}}],
                "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}}
    model = {"type": "BPE", "unk_token": "<unk>", "fuse_unk": True, "byte_fallback": True,
             "vocab": META_VOCAB, "merges": [["\u2581", "a"], ["a", "b"]]}
    legacy = {"added_tokens": [{"id": 1, "content": "<s>", "special": True,
                                "normalized": False}],
              "normalizer": {"type": "Sequence", "normalizers": [
                  {"type": "Prepend", "prepend": "\u2581"},
                  {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
              "pre_tokenizer": None, "post_processor": template, "model": model}
    metaspace = dict(legacy, normalizer=None, pre_tokenizer={
        "type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": True})
    # Issue 37: a Split regex that backtracks (O(n^2) per start position) fails its text
    # within the regex budget.
    # (The fuzzer encodes the input itself too: "probe" is the text the pattern backtracks on.)
    backtracking = dict(split, probe="a" * 2500 + "b", pre_tokenizer={
        "type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "a*a*(?:c|$)"}, "behavior": "Isolated",
             "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]})
    return {"byte_level": byte_level, "split": split, "legacy": legacy, "metaspace": metaspace,
            "backtracking": backtracking}


def varint(value):
    out = b""
    while True:
        byte = value & 0x7F
        value >>= 7
        out += bytes([byte | (0x80 if value else 0)])
        if not value:
            return out


def field(number, payload):
    """A protobuf field: bytes -> length-delimited, float -> fixed32, int -> varint."""
    if isinstance(payload, bytes):
        return varint(number << 3 | 2) + varint(len(payload)) + payload
    if isinstance(payload, float):
        return varint(number << 3 | 5) + struct.pack("<f", payload)
    return varint(number << 3) + varint(payload)


def sentencepiece_model(model_type):
    pieces = [("<unk>", 0.0, 2), ("<s>", 0.0, 3), ("</s>", 0.0, 3)]
    pieces += [(f"<0x{b:02X}>", 0.0, 6) for b in (0x0A, 0xC3, 0xA9)]
    pieces += [("\u2581a", -1.0, 1), ("ab", -2.0, 1), ("\u2581", -3.0, 1), ("a", -4.0, 1),
               ("b", -5.0, 1)]
    proto = b"".join(field(1, field(1, p.encode()) + field(2, s) + field(3, t))
                     for p, s, t in pieces)
    proto += field(2, field(3, model_type) + field(35, 1) + field(40, 0) + field(41, 1) +
                   field(42, 2))
    proto += field(3, field(1, b"identity") + field(3, 1) + field(4, 0))
    return proto


def torch_zip():
    buffer = io.BytesIO()
    torch.save({"w": torch.arange(6, dtype=torch.float32).reshape(2, 3),
                "b": torch.zeros(3, dtype=torch.float16)}, buffer)
    return buffer.getvalue()


def zip64():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        with archive.open("archive/data.pkl", "w", force_zip64=True) as f:
            f.write(b"\x80\x02}q\x00.")
        archive.writestr("archive/data/0", b"\x00" * 16)
    return buffer.getvalue()


def safetensors_seeds():
    tensors = {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3),
               "h": torch.ones(4, dtype=torch.float16), "b": torch.zeros(2, dtype=torch.bfloat16)}
    path = os.path.join("/tmp", f"fuzz_seed_{os.getpid()}.safetensors")
    hf_io.write_safetensors(path, tensors, metadata={"format": "pt"})
    with open(path, "rb") as f:
        data = f.read()
    os.remove(path)
    return data


def tiny_checkpoints(weights):
    """Per family: its weights as its fixture writes them (one layer, hidden 16); returns
    the configs."""
    args = argparse.Namespace(hidden=16, layers=1, heads=4)
    configs = {}
    for family, (config, params, state_dict, _, _, writer) in train_causal.FAMILIES.items():
        torch.manual_seed(0)
        cfg = config(args)
        directory = os.path.join(weights, family)
        os.makedirs(directory, exist_ok=True)
        writer(directory, state_dict(params(cfg), cfg))
        configs[family] = cfg
    return configs


def upload_lies():
    """CompleteWorkRequest fragments the fuzzer merges into a valid upload: a shape that lies,
    a block too short, a fingerprint of another hash, a vector block of an unknown kind."""
    metrics = lambda *fields: field(3, b"".join(fields))  # noqa: E731
    block = lambda number, name, values: field(number, field(1, name) + field(  # noqa: E731
        2, b"".join(struct.pack("<d", v) for v in values)))
    return {
        "more_layers": metrics(field(2, 3)),
        "negative_heads": metrics(field(3, -2 & (1 << 64) - 1)),
        "huge_head_dim": metrics(field(4, 1 << 30)),
        "short_block": metrics(block(5, b"qk_mean_cosine", [0.5])),
        "unknown_vector": metrics(block(7, b"z_mean", [1.0] * 16)),
        "more_samples": metrics(field(12, 7)),
        "fingerprint": field(6, b"md5:abc"),
    }


def main():
    out = sys.argv[1]
    for name, data in upload_lies().items():
        write(out, "complete_work_fuzzer", name, data)
    for i, query in enumerate([
            "run=seed0&metric=qk_mean_cosine&layer=3&head=0&from_step=0&to_step=40000",
            "run=seed0&metric=attn_entropy&since_step=40000&max_points=10",
            "run=r&kind=q_mean&layer=0&head=0&probeId=p1",
            "run=r&layer=0&head=0&basis=union&step=100",
            "dimension=64&namespace=team",
            "run=r&limit=5", "id=1", "run=a%20b&metric=%E2%82%AC&layer=+1&head=1e3&x="]):
        write(out, "query_params_fuzzer", f"query{i}", query)
    write(out, "safetensors_fuzzer", "mixed.safetensors", safetensors_seeds())
    # Issue 37's findings, small: a header flood, tensors overlapping a misaligned span.
    write(out, "safetensors_fuzzer", "header_flood.safetensors",
          hostile_checkpoints.header_flood(2000))
    write(out, "safetensors_fuzzer", "overlapping_misaligned.safetensors",
          hostile_checkpoints.overlapping_misaligned(40, 4096))
    write(out, "pickle_fuzzer", "empty_lists.pkl", hostile_checkpoints.empty_list_pickle(64 << 10))
    # And at -max_len (1 MiB, scripts/fuzz.sh), where the amplification passes the heap bound
    # (fuzz/amplification_guard.h) and the quadratic header the second: the findings as the
    # fuzzers catch them against the readers before issue 37.
    empty_lists = hostile_checkpoints.empty_list_pickle((1 << 20) - 4096)
    write(out, "pickle_fuzzer", "empty_lists_1m.pkl", empty_lists)
    write(out, "torch_zip_fuzzer", "empty_lists_1m.bin", hostile_checkpoints.torch_zip(empty_lists))
    write(out, "safetensors_fuzzer", "overlapping_misaligned_1m.safetensors",
          hostile_checkpoints.overlapping_misaligned(200, 960 << 10))
    write(out, "safetensors_fuzzer", "header_flood_1m.safetensors",
          hostile_checkpoints.header_flood(11000))
    zipped = torch_zip()
    write(out, "torch_zip_fuzzer", "torch_save.bin", zipped)
    with zipfile.ZipFile(io.BytesIO(zipped)) as archive:
        pickle = next(n for n in archive.namelist() if n.endswith("data.pkl"))
        write(out, "pickle_fuzzer", "data.pkl", archive.read(pickle))
    configs = tiny_checkpoints(os.path.join(out, "..", "weights"))
    for index, family in enumerate(["gpt_neox", "gpt2", "llama", "olmo2"]):
        write(out, "model_config_fuzzer", family,
              bytes([index]) + json.dumps(configs[family]).encode())
    # Issue 37: a head_dim that sized the rotary table (1 GiB) before any weight was read.
    write(out, "model_config_fuzzer", "llama_huge_head_dim",
          bytes([2]) + json.dumps(dict(configs["llama"], head_dim=1 << 27)).encode())
    for name, value in tokenizer_jsons().items():
        write(out, "tokenizer_json_fuzzer", f"{name}.json", json.dumps(value))
    write(out, "sentencepiece_model_fuzzer", "bpe.model", sentencepiece_model(2))
    write(out, "sentencepiece_model_fuzzer", "unigram.model", sentencepiece_model(1))
    for i, text in enumerate(["Hello world, it's 2024!", "  two\n\nlines\r\n\ttab",
                              "caf\u00e9 \u4f60\u597d \U0001F917 <s> </s> <|endoftext|>",
                              "IT'S 123456 \u0130stanbul \u2581 \u00a0 \u0085",
                              "a" * 2500 + "b", " " * 2000 + "x\n" + "\t" * 2000]):
        write(out, "tokenizer_encode_fuzzer", f"text{i}", text)
    write(out, "vocab_files_fuzzer", "wordpiece",
          "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n##lo\nworld\n,\n!\nun\n##aff\n##able\n")
    write(out, "vocab_files_fuzzer", "gpt2",
          json.dumps(BYTE_LEVEL_VOCAB) + "\0#version: 0.2\na b\na a\n\u0120 ab\n")
    write(out, "token_probe_fuzzer", "probe", "[1, 2, 3]\n\n[4, 5, 50256]\n")
    # Issue 37: long lines, cut to the sequence length as read; JSON's corners.
    write(out, "token_probe_fuzzer", "long_lines", ("[" + ",".join(["7"] * 8000) + "]\n") * 4)
    # One line at -max_len (1 MiB, scripts/fuzz.sh): parsed whole it passes the heap bound.
    write(out, "token_probe_fuzzer", "long_line_1m",
          "[" + ",".join(["7"] * ((1 << 19) - 2)) + "]\n")
    write(out, "token_probe_fuzzer", "json_corners", "\ufeff[1 , -0]\n\t[2]\r\n[01]\n")
    for name in ["multiberts-seed_0-step_20k", "step_600", "checkpoint-200",
                 "stage1-step1000-tokens4B", "step_1M", "ckpt_042"]:
        write(out, "token_probe_fuzzer", name, name)
    # Directory trees (step_discovery_fuzzer.cc: "d PATH", "f PATH<TAB>TEXT", "l PATH<TAB>DEST").
    layouts = {
        "named": "d multiberts-seed_0-step_20k\nd multiberts-seed_0-step_40k\nd notes\n"
                 "f step_9\tnot a directory\nl step_60\tnotes\n",
        "same_step": "d step_1k\nd step1000\nd ckpt_7\n",
        "hf_cache": "d snapshots/0a1b2c\nd snapshots/3d4e5f\nf refs/main\t3d4e5f\n"
                    "f refs/step1000\t0a1b2c\nf refs/step2000\t3d4e5f\n"
                    "f refs/pr/step3000\tmissing\n",
        "hf_cache_bad_ref": "d snapshots/aa\nf refs/step5\tnot-a-hash\n",
    }
    for name, layout in layouts.items():
        write(out, "step_discovery_fuzzer", name, layout)
    write(out, "zip_archive_fuzzer", "torch_save.bin", torch_zip())
    write(out, "zip_archive_fuzzer", "zip64.bin", zip64())


if __name__ == "__main__":
    main()
