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

Results come back on the org's own topic, PREFIX + "results." + the org's
topic-safe name (docs/trust.md), and only a result the gate signed counts:
its header `tollgate-result-sig` is an EdDSA JWT made with the gate key
(endpoints.json's gate_key.public_key, or --gate-key from GET /v1/gate-key)
whose claims name the result's org_id, agent_id, request_id, status and
value_sha256 (hex SHA-256 of the exact value bytes). A message that fails
any of these checks is counted as refused and ignored. A `pending` message
(the call waits for approvers) is printed and the wait goes on.

It sends --count echo calls (plus one current_time and one call the slice
policy denies), keyed by agent id, then waits for one result per request and
prints a JSON summary as its last line. Exit code 0 when every echo and
current_time call completed and the denied call was denied.
"""
import base64
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
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey


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


def topic_safe(name):
    """An org's name as a topic name's tail (core/message.h TopicSafeName)."""
    out = ""
    for b in name.encode():
        c = chr(b)
        out += c if (c.isascii() and (c.isalnum() or c in "_-")) else ".%02x" % b
    if not out or len(out) > 180:
        return ".h" + hashlib.sha256(name.encode()).hexdigest()[:40]
    return out


def gate_key(public_b64url):
    """The gate's Ed25519 public key from its base64url raw bytes."""
    raw = base64.urlsafe_b64decode(public_b64url + "=" * (-len(public_b64url) % 4))
    return Ed25519PublicKey.from_public_bytes(raw)


def verify_result(gate, msg, org, agent):
    """The result in `msg` if the gate signed it for (org, agent), else None."""
    headers = dict(msg.headers() or [])
    token = headers.get("tollgate-result-sig")
    if token is None:
        return None
    try:
        claims = jwt.decode(token, gate, algorithms=["EdDSA"])
        res = json.loads(msg.value())
    except Exception:  # a bad signature, a bad token, bad JSON: not a result
        return None
    if claims.get("typ") != "tollgate-result":
        return None
    if claims.get("value_sha256") != hashlib.sha256(msg.value()).hexdigest():
        return None
    if any(claims.get(k) != res.get(k) for k in ("org_id", "agent_id", "request_id", "status")):
        return None
    if res.get("org_id") != org or res.get("agent_id") != agent:
        return None
    return res


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
    ap.add_argument("--gate-key", default=None, help="the gate's public key (default: endpoints.json's)")
    ap.add_argument("--shared-results-topic", action="store_true",
                    help="results on PREFIXresults (a deployment run with --shared-results-topic)")
    a = ap.parse_args()

    bootstrap, prefix, gate_pub, shared = a.bootstrap, a.topic_prefix, a.gate_key, a.shared_results_topic
    if not bootstrap or not gate_pub:
        with open(os.path.join(a.data, "endpoints.json")) as f:
            ep = json.load(f)
        bootstrap = bootstrap or ep["bootstrap"]
        prefix = prefix or ep.get("topic_prefix")
        gate_pub = gate_pub or ep["gate_key"]["public_key"]
        shared = shared or ep.get("shared_results_topic", False)
    prefix = prefix or "tollgate."
    gate = gate_key(gate_pub)
    key, key_id = load_signer(a.key or os.path.join(a.data, "keys", a.org, a.agent + ".pem"))
    results_topic = prefix + "results" + ("" if shared else "." + topic_safe(a.org))

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "partitioner": "murmur2_random"})
    # A producer's metadata request makes the org's topic where the broker
    # creates topics on demand (the embedded one does).
    producer.list_topics(topic=results_topic, timeout=10)
    # Read results from the start of the topic; our request ids are new.
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "example-agent-" + uuid.uuid4().hex,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })
    consumer.subscribe([results_topic])
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
    refused = 0
    deadline = time.time() + a.timeout
    while len(got) < len(expected) and time.time() < deadline:
        msg = consumer.poll(0.2)
        if msg is None or msg.error():
            continue
        res = verify_result(gate, msg, a.org, a.agent)
        if res is None:
            refused += 1
            continue
        rid = res.get("request_id")
        if res.get("status") == "pending":
            print(json.dumps({"pending": rid, "approval": res.get("approval")}), file=sys.stderr)
            continue
        if rid in expected and rid not in got:
            got[rid] = res
    consumer.close()

    ok = True
    summary = {"sent": len(expected), "received": len(got), "refused": refused, "topic": results_topic,
               "statuses": {}, "log_seqs": {}}
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
