#!/usr/bin/python3
"""An example agent: publishes tool requests to tollgate and reads the results.

Uses python3-confluent-kafka (Debian's package, installed for /usr/bin/python3).

    /usr/bin/python3 examples/agent.py --data tollgate-data          # endpoints from `tollgate up`
    /usr/bin/python3 examples/agent.py --bootstrap 127.0.0.1:PORT --count 10

It sends --count echo calls (plus one current_time and one call the slice
policy denies), keyed by agent id, then waits for one result per request and
prints a JSON summary as its last line. Exit code 0 when every echo and
current_time call completed and the denied call was denied.
"""
import argparse
import json
import os
import sys
import time
import uuid

from confluent_kafka import Consumer, Producer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="tollgate-data", help="where `tollgate up` wrote endpoints.json")
    ap.add_argument("--bootstrap", help="Kafka bootstrap servers (instead of endpoints.json)")
    ap.add_argument("--topic-prefix", default=None)
    ap.add_argument("--agent", default="example-agent")
    ap.add_argument("--session", default="example-session-" + uuid.uuid4().hex[:8])
    ap.add_argument("--org", default="example-org")
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
        producer.produce(prefix + "requests", key=a.agent, value=json.dumps(req),
                         headers={"request_id": rid, "session_id": a.session})
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
