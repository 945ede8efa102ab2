#!/usr/bin/python3
"""An independent verifier of tollgate's checkpoints and proofs.

Written from RFC 9162 (section 2.1: Merkle tree hashing, inclusion and
consistency verification) and the C2SP specifications signed-note,
tlog-checkpoint and tlog-proof, and from docs/log_format.md for what a leaf
is. It shares no code with tollgate: an auditor can run it (or rewrite it)
with nothing but Python and the `cryptography` package.

Usage: tlog_verify.py BUNDLE.json
BUNDLE: {"vkey": "<name>+<hex8>+<base64(0x01||pubkey)>",
         "checkpoints": ["<signed note>", ...],
         "inclusions": [{"record": {export record}, "proof": "<tlog-proof>"}],
         "consistency": [{"old": "<signed note>", "new": "<signed note>",
                          "proof": "<consistency text>"}]}
Prints one line per check and exits 0 only if every check passed.
"""
import base64
import hashlib
import json
import sys

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

EM_DASH = "\u2014"


def sha256(b):
    return hashlib.sha256(b).digest()


def leaf_hash(data):
    return sha256(b"\x00" + data)


def node_hash(left, right):
    return sha256(b"\x01" + left + right)


# --- signed notes (C2SP signed-note) -------------------------------------

def parse_vkey(vkey):
    name, hexhash, b64 = vkey.split("+", 2)  # base64 may hold "+"
    raw = base64.b64decode(b64, validate=True)
    if raw[0] != 0x01 or len(raw) != 33:
        raise ValueError("not an Ed25519 verifier key")
    key_hash = sha256(name.encode() + b"\n" + raw)[:4]
    if key_hash.hex() != hexhash:
        raise ValueError("verifier key hash does not match its key")
    return name, key_hash, Ed25519PublicKey.from_public_bytes(raw[1:])


def open_note(note, vkey):
    """The note's text if a signature line by `vkey` verifies; else raises."""
    name, key_hash, pub = parse_vkey(vkey)
    text, sep, sigs = note.rpartition("\n\n")
    if not sep or not sigs.endswith("\n"):
        raise ValueError("malformed note")
    text += "\n"
    good = 0
    for line in sigs[:-1].split("\n"):
        if not line.startswith(EM_DASH + " "):
            raise ValueError("malformed signature line")
        who, b64 = line[2:].rsplit(" ", 1)
        raw = base64.b64decode(b64, validate=True)
        if who != name or raw[:4] != key_hash:
            continue  # someone else's signature (a witness): not ours to check
        pub.verify(raw[4:], text.encode())  # raises InvalidSignature
        good += 1
    if good != 1:
        raise ValueError("no (or more than one) signature by " + name)
    return text


def parse_checkpoint(text):
    lines = text.split("\n")
    if len(lines) < 4 or lines[-1] != "":
        raise ValueError("a checkpoint has at least three lines")
    origin, size, root = lines[0], lines[1], lines[2]
    if not size.isdigit() or (size != "0" and size.startswith("0")):
        raise ValueError("bad tree size")
    root = base64.b64decode(root, validate=True)
    if len(root) != 32:
        raise ValueError("bad root hash")
    return origin, int(size), root


# --- RFC 9162 2.1.3.2 and 2.1.4.2 ----------------------------------------

def verify_inclusion(index, size, leaf, path, root):
    if index >= size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in path:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


def verify_consistency(m, n, root_m, root_n, path):
    if m == n:
        return not path and root_m == root_n
    if m == 0 or m > n or not path:
        return False
    if m & (m - 1) == 0:
        path = [root_m] + path
    fn, sn = m - 1, n - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return fr == root_m and sr == root_n and sn == 0


# --- tollgate's records (docs/log_format.md) ------------------------------

def record_hash(record):
    """SHA-256(prev_hash || canonical body): the leaf's data."""
    body = {k: v for k, v in record.items() if k not in ("prev_hash", "hash")}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return sha256(bytes.fromhex(record["prev_hash"]) + canonical.encode())


def parse_tlog_proof(text):
    head, sep, note = text.partition("\n\n")
    if not sep:
        raise ValueError("malformed tlog-proof")
    lines = head.split("\n")
    if lines[0] != "c2sp.org/tlog-proof@v1":
        raise ValueError("not a tlog-proof")
    i = 1
    if lines[i].startswith("extra "):
        i += 1
    if not lines[i].startswith("index "):
        raise ValueError("no index line")
    index = int(lines[i][6:])
    hashes = [base64.b64decode(h, validate=True) for h in lines[i + 1:]]
    return index, hashes, note


def parse_consistency(text):
    lines = text.rstrip("\n").split("\n")
    if lines[0] != "tollgate.dev/tlog-consistency@v1":
        raise ValueError("not a consistency proof")
    old = int(lines[1].removeprefix("old "))
    new = int(lines[2].removeprefix("new "))
    return old, new, [base64.b64decode(h, validate=True) for h in lines[3:]]


def main(path):
    bundle = json.load(open(path))
    vkey = bundle["vkey"]
    ok = True

    def check(what, cond):
        nonlocal ok
        print(("OK   " if cond else "FAIL ") + what)
        ok = ok and cond

    def opened(note):
        try:
            return parse_checkpoint(open_note(note, vkey))
        except (ValueError, InvalidSignature) as e:
            check("checkpoint signature: " + str(e or "invalid signature"), False)
            return None

    for note in bundle.get("checkpoints", []):
        cp = opened(note)
        if cp:
            check("checkpoint %s size %d is signed" % (cp[0], cp[1]), True)
    for item in bundle.get("inclusions", []):
        rec = item["record"]
        index, hashes, note = parse_tlog_proof(item["proof"])
        cp = opened(note)
        if not cp:
            continue
        leaf = leaf_hash(record_hash(rec))
        check("seq %d is leaf %d" % (rec["seq"], index), index == rec["seq"] - 1)
        check("seq %d is included in size %d" % (rec["seq"], cp[1]),
              verify_inclusion(index, cp[1], leaf, hashes, cp[2]))
    for item in bundle.get("consistency", []):
        old, new = opened(item["old"]), opened(item["new"])
        if not old or not new:
            continue
        m, n, hashes = parse_consistency(item["proof"])
        check("the proof is between the two checkpoints", (m, n) == (old[1], new[1]))
        check("size %d is a prefix of size %d" % (old[1], new[1]),
              old[0] == new[0] and verify_consistency(old[1], new[1], old[2], new[2], hashes))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
