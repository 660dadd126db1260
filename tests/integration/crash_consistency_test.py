#!/usr/bin/python3
"""The crash-consistency harness (crash_consistency.py) with 10 SIGKILLs: every job
finishes, every step is stored exactly once, the database and every backup are sound."""
import os
import shutil
import tempfile
import unittest

import crash_consistency


class CrashConsistencyTest(unittest.TestCase):
    def test_ten_kills_lose_duplicate_and_damage_nothing(self):
        self.assertTrue(os.path.exists(os.path.join(crash_consistency.FIXTURE, "probe.jsonl")),
                        f"fixture bert_run missing at {crash_consistency.FIXTURE}")
        work = tempfile.mkdtemp(prefix="anisoscope_crash_")
        try:
            figures = crash_consistency.run(kills=10, seed=7, work=work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        print(figures)
        self.assertEqual(figures["kills"], 10)
        self.assertGreater(figures["backups"], 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
