#!/usr/bin/python3
"""The attack a hash chain alone cannot stop: whoever can write the log
rewrites one record and recomputes every hash after it (docs/log_format.md,
"Limits of the chain"). Reads a range export from seq 1, changes the data
of record SEQ (sets data.rewritten = true) and writes an export that
verifies on its own. SEQ may be "first:TYPE": the first record of that type.

Usage: rewrite_log.py IN OUT SEQ
"""
import hashlib
import json
import sys


def canonical(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def main(src, dst, seq):
    lines = [json.loads(l) for l in open(src, encoding="utf-8") if l.strip()]
    header, records, end = lines[0], lines[1:-1], lines[-1]
    if header.get("from_seq") != 1:
        raise SystemExit("a rewrite from seq 1 needs an export from seq 1")
    if isinstance(seq, str):
        seq = next(r["seq"] for r in records if r["type"] == seq.split(":", 1)[1])
    prev = bytes(32)
    for r in records:
        if r["seq"] == seq:
            r["data"]["rewritten"] = True
        body = {k: v for k, v in r.items() if k not in ("prev_hash", "hash")}
        r["prev_hash"] = prev.hex()
        prev = hashlib.sha256(prev + canonical(body).encode()).digest()
        r["hash"] = prev.hex()
    end["tollgate_export_end"]["last_hash"] = prev.hex()
    with open(dst, "w", encoding="utf-8") as out:
        for obj in [header] + records + [end]:
            out.write(canonical(obj) + "\n")


if __name__ == "__main__":
    arg = sys.argv[3]
    main(sys.argv[1], sys.argv[2], arg if arg.startswith("first:") else int(arg))
