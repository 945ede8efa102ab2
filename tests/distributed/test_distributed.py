"""The distributed deployment on one machine (issue 16, docs/deployments.md).

`tollgate broker`, then one process per stage (ingest, decide, approve,
execute x2) and the log keeper (`tollgate stage audit`), each with its own
data directory; the agents are a real Kafka client (harness.Fleet). Run by
ctest one test at a time (tests/CMakeLists.txt); TOLLGATE_BIN names the
binary, TOLLGATE_KEEP_DIST_DIRS=1 keeps the scratch directories.
"""
import collections
import json
import os
import time
import unittest
import urllib.request

import harness as h


def request_events(events):
    """request_id -> [(event id, type), ...] in log order, for the agents'
    requests (credential changes differ: each deployment has its own keys)."""
    out = collections.defaultdict(list)
    for e in events:
        if e.get("request_id") and not e["request_id"].startswith("cred:"):
            out[e["request_id"]].append((e["id"], e["type"]))
    return out


def verdicts(events):
    return {e["request_id"]: e["data"]["verdict"] for e in events if e["type"] == "decision.made"}


def run_embedded(scratch, reqs, agents):
    """The same input through `tollgate up`: its log's events."""
    up = h.Embedded(scratch)
    try:
        keys = {a: h.add_agent(up.data, a) for a in agents}
        fleet = h.Fleet(up.bootstrap, up.api, up.admin_token, keys)
        for r in reqs:
            fleet.send(r)
        fleet.flush()
        fleet.wait_all([r["request_id"] for r in reqs])
        fleet.close()
    finally:
        up.stop()
    return h.log_events(up.data)


class DistributedDeployment(unittest.TestCase):
    maxDiff = 4000

    def setUp(self):
        self.scratch = h.Scratch(self.id().split(".")[-1][:20])
        self.d = None

    def tearDown(self):
        if self.d:
            self.d.stop()
        if self._outcome_ok():
            self.scratch.remove()
        else:
            print("kept", self.scratch.path)

    def _outcome_ok(self):
        res = getattr(getattr(self, "_outcome", None), "result", None)
        return res is None or not any(t is self for t, _ in res.failures + res.errors)

    def start(self, agents):
        self.d = h.Distributed(self.scratch)
        keys = {a: h.add_agent(self.scratch.sub("keeper"), a) for a in agents}
        self.d.start_pipeline(executes=2)
        return h.Fleet(self.d.bootstrap, self.d.api, self.d.admin_token, keys)

    def assert_one_result_each(self, fleet, reqs):
        dup = {rid: [r.get("_seen") for r in rs] for rid, rs in fleet.results.items() if len(rs) > 1}
        first = next((rs for rs in fleet.results.values() if len(rs) > 1), [])
        self.assertEqual(dup, {}, "requests with more than one result (each copy's partition, offset and "
                         "source); the first one's copies:\n" + "\n".join(json.dumps(r, sort_keys=True) for r in first))
        for r in reqs:
            self.assertIn(r["request_id"], fleet.results)

    def assert_copies_agree(self, keepers, stages):
        """Every keeper holds the same record; every stage's copy (which
        catches up only when it has work) is a verified prefix of it: the
        same hash at its head seq."""
        record = {e["seq"]: e["hash"] for e in h.log_events(self.scratch.sub(keepers[0]))}
        for d in keepers + stages:
            head = h.verify(self.scratch.sub(d)).strip().splitlines()[-1]  # "... head seq N hash H"
            seq, digest = int(head.split(" head seq ")[1].split()[0]), head.split(" hash ")[-1]
            if d in keepers:
                self.assertEqual(seq, max(record), d + ": " + head)
            self.assertEqual(record.get(seq), digest, d + ": " + head)

    def keeper_get(self, instance, path):
        ep = h._read_json(os.path.join(self.scratch.sub(instance), "endpoints.json"))
        req = urllib.request.Request(ep["http"] + path, headers={"Authorization": "Bearer " + self.d.admin_token})
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.read().decode()

    def assert_keepers_sign_the_same_checkpoints(self, keepers):
        """Each keeper keeps the tree of its own copy of the log and signs
        checkpoints of it with the deployment's checkpoint key: for the same
        size, the same bytes (docs/deployments.md, "Checkpoints")."""
        keys = {k: json.loads(self.keeper_get(k, "/v1/audit/checkpoint-key")) for k in keepers}
        self.assertEqual(len({json.dumps(v, sort_keys=True) for v in keys.values()}), 1, keys)

        def signed_alike():
            # Signed on demand at each keeper's head; the log is idle, so
            # once every copy is level they sign the same size.
            notes = [self.keeper_get(k, "/v1/audit/checkpoint?fresh=1") for k in keepers]
            return notes if len({n.split("\n")[1] for n in notes}) == 1 else None

        notes = h.wait_until(signed_alike, 30, "the keepers' checkpoints of one size")
        self.assertEqual(notes[1:], notes[:1] * (len(notes) - 1))
        size = notes[0].split("\n")[1]
        self.assertGreater(int(size), 0)
        for k in keepers:  # stored and served by size too
            self.assertEqual(self.keeper_get(k, "/v1/audit/checkpoint?size=" + size), notes[0], k)

    def test_every_request_ends_once_and_the_keepers_log_matches_the_embedded_one(self):
        agents = ["agent-%d" % a for a in range(3)]
        reqs = h.workload(3, 16)
        fleet = self.start(agents)
        for r in reqs:
            fleet.send(r)
        fleet.flush()
        fleet.wait_all([r["request_id"] for r in reqs])
        fleet.close()
        self.assert_one_result_each(fleet, reqs)
        statuses = collections.Counter(rs[0]["status"] for rs in fleet.results.values())
        self.assertGreater(statuses["completed"], 0, statuses)
        self.assertGreater(statuses["denied"], 0, statuses)  # /etc/shadow and the session budget
        self.assertGreater(len(fleet.approved), 0, "no call asked")
        # Each stage process serves its own /metrics: its runner's figures.
        for instance in ("ingest", "decide", "approve", "execute-1", "execute-2"):
            stage = instance.split("-")[0]
            text = self.d.metrics(instance)
            self.assertRegex(text, r'\ntollgate_stage_process_seconds_count\{stage="%s"\} \d+\n' % stage, instance)
            self.assertIn("tollgate_log_head_seq ", text, instance)
            # Its copy of the log: each process appends what it copies.
            self.assertRegex(text, r'\ntollgate_log_write_seconds_count [1-9]\d*\n', instance)
            self.assertRegex(text, r'\ntollgate_log_size_bytes \d', instance)
        for stage in ("ingest", "decide"):
            self.assertRegex(self.d.metrics(stage), r'\ntollgate_stage_messages_total\{stage="%s"\} [1-9]' % stage)

        # A second keeper started now copies the whole record: same events,
        # same seqs, same hashes as the first and as every stage's copy.
        self.d.stage("audit", "keeper-2")
        dist = h.log_events(self.scratch.sub("keeper"))
        h.wait_until(lambda: len(h.log_events(self.scratch.sub("keeper-2"))) == len(dist), 30, "keeper-2")
        self.assert_keepers_sign_the_same_checkpoints(["keeper", "keeper-2"])
        self.d.stop()
        self.assert_copies_agree(["keeper", "keeper-2"], ["ingest", "decide", "approve", "execute-1", "execute-2"])

        # The embedded deployment, same input: the same events per request,
        # in the same order, and the same verdicts.
        emb = run_embedded(self.scratch, reqs, agents)
        self.assertEqual(dict(request_events(dist)), dict(request_events(emb)))
        self.assertEqual(verdicts(dist), verdicts(emb))
        counts = h.ticks(self.scratch.workspaces)
        self.assertEqual({k: v for k, v in counts.items() if v != 1}, {}, "cli:tick ran twice")

    def test_kill_9_of_each_process_and_a_rebalance_lose_nothing_and_run_nothing_twice(self):
        agents = ["agent-%d" % a for a in range(3)]
        reqs = h.workload(3, 40, tag="k")
        fleet = self.start(agents)
        # Faults while the stream flows: each stage process (and the keeper)
        # is killed with SIGKILL and restarted; then a second decide joins
        # its group mid-stream.
        faults = ["ingest", "decide", "approve", "execute-1", "keeper", "execute-2", "+decide-2"]
        every = len(reqs) // (len(faults) + 1)
        for i, r in enumerate(reqs):
            fleet.send(r)
            if i % 10 == 9:
                fleet.flush()
                fleet.poll(0.05)
            if i and i % every == 0 and faults:
                f = faults.pop(0)
                if f.startswith("+"):
                    self.d.stage("decide", f[1:])
                else:
                    p = self.d.keeper if f == "keeper" else self.d.procs[f]
                    p.kill9()
                    p.start().wait_up()
        fleet.flush()
        fleet.wait_all([r["request_id"] for r in reqs], timeout=180)
        fleet.close()
        self.assert_one_result_each(fleet, reqs)
        h.wait_until(lambda: len(h.log_events(self.scratch.sub("keeper"))) >= 1, 5, "the keeper")
        self.d.stop()
        dist = h.log_events(self.scratch.sub("keeper"))
        self.assert_copies_agree(["keeper"], ["ingest", "decide", "approve", "execute-1", "execute-2", "decide-2"])
        # No event twice, no mutating call run twice, one settlement each.
        ids = [e["id"] for e in dist]
        self.assertEqual(len(ids), len(set(ids)))
        counts = h.ticks(self.scratch.workspaces)
        self.assertEqual({k: v for k, v in counts.items() if v != 1}, {}, "cli:tick ran twice")
        started = collections.Counter(e["request_id"] for e in dist if e["type"] == "execution.started")
        self.assertEqual({k: v for k, v in started.items() if v != 1}, {})
        # Budgets as in an uninterrupted run: the same verdict for every call.
        emb = run_embedded(self.scratch, reqs, agents)
        self.assertEqual(verdicts(dist), verdicts(emb))
        self.assertEqual(dict(request_events(dist)), dict(request_events(emb)))

    def test_a_forged_event_or_flow_is_refused_and_recorded_not_obeyed(self):
        agents = ["agent-0"]
        fleet = self.start(agents)
        # The attacker can write to every topic. It forges the credential
        # that would let its own key act as agent-0: once unsealed, once
        # sealed with a key of its own.
        attacker, attacker_kid = h.new_key()
        real = [e for e in h.log_events(self.scratch.sub("keeper")) if e["type"] == "credential.added"
                and e["data"].get("identity") == "agent-0"][0]
        forged = {k: v for k, v in real.items() if k not in ("seq", "hash", "prev_hash")}
        forged["id"] = "f" * 32
        forged["request_id"] = "cred:" + attacker_kid
        forged["data"] = dict(real["data"], key_id=attacker_kid, public_key=h.public_key_b64(attacker),
                              added_by="admin")
        forged_bytes = h.json.dumps(forged, separators=(",", ":")).encode()
        raw = h.Producer({"bootstrap.servers": self.d.bootstrap})
        raw.produce("tollgate.events", value=forged_bytes)
        raw.produce("tollgate.events", value=forged_bytes, headers=[("tollgate-events-mac", "0" * 64)])
        # And 1,000 messages of junk: counted into summaries, not 1,000
        # events in every copy (docs/trust.md).
        for _ in range(1000):
            raw.produce("tollgate.events", value=b"junk-bytes!")
            raw.poll(0)
        # And a well-formed flow for a request ingest never saw, straight to
        # execute: a real one (of an allowed call) with another request id.
        fleet.send({"request_id": "legit", "org_id": h.ORG, "agent_id": "agent-0", "session_id": "s",
                    "tool": "cli:tick", "args": {}})
        fleet.flush()
        fleet.wait_all(["legit"], approve=False)
        flow = h.read_topic(self.d.bootstrap, "tollgate.execute")[0]
        flow["request"]["request_id"] = "forged-1"
        raw.produce("tollgate.execute", key="agent-0", value=h.json.dumps(flow).encode())
        raw.flush(30)
        # The attacker's key is not agent-0's: its request is refused...
        fleet.keys["agent-0"] = (attacker, attacker_kid)
        fleet.send({"request_id": "by-attacker", "org_id": h.ORG, "agent_id": "agent-0", "session_id": "s",
                    "tool": "echo", "args": {"text": "hi"}})
        fleet.flush()
        # ...under org "unknown" and an id of its bytes: nothing answers for
        # agent-0's request id (docs/trust.md).
        refusal = h.wait_until(lambda: [e for e in h.log_events(self.scratch.sub("keeper"))
                                        if e["type"] == "request.rejected" and e["org_id"] == "unknown"
                                        and e["data"].get("claimed", {}).get("request_id") == "by-attacker"],
                               30, "ingest's refusal of the attacker's request")[0]
        self.assertEqual(refusal["data"]["error"]["code"], "E_UNAUTHENTICATED")
        self.assertTrue(refusal["request_id"].startswith("u-"), refusal["request_id"])
        res = [r for r in h.read_topic(self.d.bootstrap, "tollgate.results.unknown")
               if r.get("request_id") == refusal["request_id"]]
        self.assertEqual([r["status"] for r in res], ["rejected"])
        # Its org's results topic, read to its end after that transaction.
        self.assertEqual([r for r in h.read_topic(self.d.bootstrap, "tollgate.results." + h.ORG)
                          if r.get("request_id") == "by-attacker"], [])
        # ...the forged flow ran nothing, and everything is on the record.
        h.wait_until(lambda: [e for e in h.log_events(self.scratch.sub("keeper"))
                              if e["type"] == "request.rejected" and e["data"].get("stage") == "execute"],
                     30, "execute's refusal of the forged flow")
        self.d.stop()
        events = h.log_events(self.scratch.sub("keeper"))
        refused = [e for e in events if e["type"] == "request.rejected"
                   and e["data"]["error"]["code"] == "E_EVENT_REFUSED"]
        self.assertEqual(sum(e["data"].get("summary", {}).get("count", 1) for e in refused), 1002)
        self.assertLessEqual(len(refused), 22, "at most 10 one by one and a summary per 1,024 offsets")
        self.assertNotIn("f" * 32, [e["id"] for e in events])
        flows = [e for e in events if e["type"] == "request.rejected" and e["data"].get("stage") == "execute"]
        self.assertEqual(flows[0]["data"]["error"]["code"], "E_NOT_IN_LOG")
        self.assertEqual(h.ticks(self.scratch.workspaces), {"legit": 1})
        self.assert_copies_agree(["keeper"], ["ingest", "decide", "approve", "execute-1", "execute-2"])


if __name__ == "__main__":
    unittest.main()
