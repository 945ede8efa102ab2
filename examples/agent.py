#!/usr/bin/python3
"""An example agent: publishes tool requests to tollgate and reads the results.

Uses Debian's python3-confluent-kafka, python3-jwt and python3-cryptography
(installed for /usr/bin/python3).

Every request is signed (docs/trust.md): the Kafka header `tollgate-auth` is
an EdDSA (Ed25519) JWT whose header's kid is the key id (the first 16 hex of
SHA-256 of the raw 32-byte public key) and whose claims are org_id, agent_id,
request_id, value_sha256 (hex SHA-256 of the exact message bytes sent) and
iat (seconds). The key must be registered for (org, agent) first:

    tollgate agents add --data tollgate-data --org example-org --agent example-agent
    /usr/bin/python3 examples/agent.py --data tollgate-data          # endpoints from `tollgate up`
    /usr/bin/python3 examples/agent.py --bootstrap 127.0.0.1:PORT --key agent.pem --count 10

--key is the agent's private key (PKCS#8 PEM), by default
DATA/keys/ORG/AGENT.pem, where `tollgate agents add` writes it.

It sends --count echo calls (plus one current_time and one call the slice
policy denies), keyed by agent id, then waits for one result per request and
prints a JSON summary as its last line. Exit code 0 when every echo and
current_time call completed and the denied call was denied.
"""
import argparse
import hashlib
import json
import os
import sys
import time
import uuid

import jwt
from confluent_kafka import Consumer, Producer
from cryptography.hazmat.primitives import serialization


def load_signer(path):
    """The agent's Ed25519 private key and its key id (the JWT's kid)."""
    with open(path, "rb") as f:
        key = serialization.load_pem_private_key(f.read(), password=None)
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return key, hashlib.sha256(raw).hexdigest()[:16]


def sign_request(key, key_id, org, agent, request_id, value):
    """The tollgate-auth header for `value`, the exact bytes that are sent."""
    claims = {"org_id": org, "agent_id": agent, "request_id": request_id,
              "value_sha256": hashlib.sha256(value).hexdigest(), "iat": int(time.time())}
    token = jwt.encode(claims, key, algorithm="EdDSA", headers={"kid": key_id})
    return token if isinstance(token, str) else token.decode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="tollgate-data", help="where `tollgate up` wrote endpoints.json")
    ap.add_argument("--bootstrap", help="Kafka bootstrap servers (instead of endpoints.json)")
    ap.add_argument("--topic-prefix", default=None)
    ap.add_argument("--agent", default="example-agent")
    ap.add_argument("--session", default="example-session-" + uuid.uuid4().hex[:8])
    ap.add_argument("--org", default="example-org")
    ap.add_argument("--key", default=None, help="the agent's private key (default DATA/keys/ORG/AGENT.pem)")
    ap.add_argument("--count", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=60)
    a = ap.parse_args()

    bootstrap, prefix = a.bootstrap, a.topic_prefix
    if not bootstrap:
        with open(os.path.join(a.data, "endpoints.json")) as f:
            ep = json.load(f)
        bootstrap = ep["bootstrap"]
        prefix = prefix or ep.get("topic_prefix")
    prefix = prefix or "tollgate."
    key, key_id = load_signer(a.key or os.path.join(a.data, "keys", a.org, a.agent + ".pem"))

    # Read results from the start of the topic; our request ids are new.
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "example-agent-" + uuid.uuid4().hex,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })
    consumer.subscribe([prefix + "results"])

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "partitioner": "murmur2_random"})
    expected = {}
    calls = [("echo", {"text": f"hello {i}"}, "completed") for i in range(a.count)]
    calls.append(("current_time", {}, "completed"))
    # The default policy's deny list keeps secrets off limits.
    calls.append(("delete_file", {"path": "/etc/shadow"}, "denied"))
    for tool, args, want in calls:
        rid = "ex-" + uuid.uuid4().hex
        req = {"request_id": rid, "org_id": a.org, "agent_id": a.agent, "session_id": a.session,
               "tool": tool, "args": args}
        value = json.dumps(req).encode()
        producer.produce(prefix + "requests", key=a.agent, value=value,
                         headers=[("request_id", rid), ("session_id", a.session),
                                  ("tollgate-auth", sign_request(key, key_id, a.org, a.agent, rid, value))])
        expected[rid] = (tool, want, args)
    producer.flush(30)

    got = {}
    deadline = time.time() + a.timeout
    while len(got) < len(expected) and time.time() < deadline:
        msg = consumer.poll(0.2)
        if msg is None or msg.error():
            continue
        res = json.loads(msg.value())
        rid = res.get("request_id")
        if rid in expected and rid not in got:
            got[rid] = res
    consumer.close()

    ok = True
    summary = {"sent": len(expected), "received": len(got), "statuses": {}, "log_seqs": {}}
    for rid, (tool, want, args) in expected.items():
        res = got.get(rid)
        status = res["status"] if res else "missing"
        summary["statuses"][rid] = status
        summary["log_seqs"][rid] = res.get("log_seq") if res else None
        if status != want:
            ok = False
        if res and tool == "echo" and res["result"]["data"] != args:
            ok = False
    summary["ok"] = ok
    print(json.dumps(summary))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
