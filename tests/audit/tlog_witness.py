#!/usr/bin/python3
"""An independent transparency-log witness, for tollgate's tests.

Written from the C2SP specifications tlog-witness (the add-checkpoint
call), tlog-cosignature (cosignature/v1), signed-note and tlog-checkpoint,
and RFC 6962/9162 consistency proofs (tests/audit/tlog_verify.py, itself
independent). It shares no code with tollgate.

Usage: tlog_witness.py --log-vkey VKEY [--name NAME] [--port N] [--state FILE]
Serves POST /add-checkpoint on 127.0.0.1 (loopback only) and prints one
JSON line first: {"port": N, "vkey": "<its cosignature verifier key>"}.
For the one log whose verifier key it pins, it keeps the latest cosigned
(size, root), in FILE when given (written before answering), and cosigns
a checkpoint only if it verifies and extends that one.
"""
import argparse
import base64
import hashlib
import http.server
import json
import os
import struct
import sys
import threading
import time

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tlog_verify import open_note, parse_checkpoint, parse_vkey, verify_consistency  # noqa: E402

EM_DASH = "\u2014"
MAX_PROOF_LINES = 63


class Refused(Exception):
    def __init__(self, status, text, content_type="text/plain"):
        super().__init__(text)
        self.status, self.text, self.content_type = status, text, content_type


class Witness:
    def __init__(self, name, log_vkey, state_file):
        self.name = name
        self.key = Ed25519PrivateKey.generate()
        pub = self.key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        self.key_hash = hashlib.sha256(name.encode() + b"\n" + b"\x04" + pub).digest()[:4]
        self.vkey = "%s+%s+%s" % (name, self.key_hash.hex(), base64.b64encode(b"\x04" + pub).decode())
        self.log_vkey = log_vkey
        self.origin = parse_vkey(log_vkey)[0]  # the log's key name is its origin
        self.state_file = state_file
        self.size, self.root = 0, None
        self.lock = threading.Lock()  # check and update atomically (the spec's race)

    def cosign(self, text):
        t = int(time.time())
        sig = self.key.sign(b"cosignature/v1\ntime %d\n" % t + text.encode())
        raw = self.key_hash + struct.pack(">Q", t) + sig
        return "%s %s %s\n" % (EM_DASH, self.name, base64.b64encode(raw).decode())

    def add_checkpoint(self, body):
        head, sep, note = body.partition("\n\n")
        if not sep:
            raise Refused(400, "no empty line after the proof")
        lines = head.split("\n")
        if not lines[0].startswith("old "):
            raise Refused(400, "no old size line")
        old_text = lines[0][4:]
        if not old_text.isdigit() or (old_text != "0" and old_text.startswith("0")):
            raise Refused(400, "bad old size")
        old = int(old_text)
        if len(lines) - 1 > MAX_PROOF_LINES:
            raise Refused(400, "too many proof lines")
        try:
            proof = [base64.b64decode(p, validate=True) for p in lines[1:]]
        except ValueError:
            raise Refused(400, "bad proof line")
        if any(len(p) != 32 for p in proof):
            raise Refused(400, "a proof line is not a hash")
        if note.split("\n", 1)[0] != self.origin:
            raise Refused(404, "unknown origin")
        try:
            text = open_note(note, self.log_vkey)
            _, size, root = parse_checkpoint(text)
        except Exception as e:  # noqa: BLE001 (any failure is a refusal)
            raise Refused(403, "the log's signature does not verify: %s" % e)
        if old > size:
            raise Refused(400, "old size above the checkpoint's")
        with self.lock:
            if old != self.size:
                raise Refused(409, "%d\n" % self.size, "text/x.tlog.size")
            if old == size:
                if self.root is not None and root != self.root:
                    raise Refused(409, "%d\n" % self.size, "text/x.tlog.size")
            elif old == 0:
                if proof:
                    raise Refused(400, "a proof from size 0 is empty")
            elif not verify_consistency(old, size, self.root, root, proof):
                raise Refused(422, "the consistency proof does not verify")
            self.size, self.root = size, root
            self.persist()
            return self.cosign(text)

    def persist(self):
        if not self.state_file:
            return
        tmp = self.state_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"size": self.size, "root": base64.b64encode(self.root).decode()}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.state_file)


def handler_for(witness):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the spec recommends

        def do_POST(self):
            if self.path.rstrip("/").rsplit("/", 1)[-1] != "add-checkpoint":
                return self.answer(404, "not found\n")
            n = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(n).decode("utf-8", errors="replace") if 0 <= n <= 1 << 20 else ""
            try:
                self.answer(200, witness.add_checkpoint(body))
            except Refused as r:
                self.answer(r.status, r.text, r.content_type)

        def answer(self, status, text, content_type="text/plain"):
            data = text.encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, fmt, *args):
            sys.stderr.write("tlog_witness %s: %s\n" % (witness.name, fmt % args))

    return Handler


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log-vkey", required=True)
    ap.add_argument("--name", default="witness.test/w1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--state")
    a = ap.parse_args()
    w = Witness(a.name, a.log_vkey, a.state)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", a.port), handler_for(w))
    print(json.dumps({"port": server.server_address[1], "vkey": w.vkey}), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
