"""Real processes for the distributed deployment's tests and benchmark.

`tollgate broker`, `tollgate stage NAME` (one process each, killed with
SIGKILL and restarted at will), `tollgate up` for the embedded comparison,
and an agent fleet that is a real Kafka client (python3-confluent-kafka):
it signs each request with its agent's key (docs/trust.md), publishes on
tollgate.requests, approves the calls that ask through the keeper's HTTP API,
and reads its org's results topic, tollgate.results.ORG (read_committed, gate-signed).

Only loopback addresses are used: the embedded broker and every HTTP server
listen on 127.0.0.1.
"""
import base64
import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request

import jwt
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from confluent_kafka import Consumer, Producer
from cryptography.hazmat.primitives import serialization

BIN = os.environ.get("TOLLGATE_BIN", "tollgate")
ORG = "org-dist"

# The shipped policy's rules plus a CLI tool that counts its runs, a tool
# that asks, and a budget that denies past 12 calls per session.
POLICY = """
version: 1
mode: ask
approval_threshold: HIGH
deny: ["*:*/etc/shadow*"]
allow: [builtin:echo, "cli:tick"]
tools:
  echo:       {danger: SAFE, read_only: true}
  write_file: {danger: MEDIUM, read_only: false}
  "cli:tick": {danger: LOW, read_only: false}
approvals:
  default: {quorum: 1, timeout_s: 900}
budgets:
  - {name: session-calls, scope: session, window: session, max_calls: 12}
"""

# Appends the request id to the agent's workspace once per run: a request
# whose id appears twice ran twice. `sleep` makes it wait on I/O.
TICK = """#!/bin/sh
sleep "${TICK_SLEEP:-0.02}"
echo "$TOLLGATE_REQUEST_ID" >> "$TOLLGATE_WORKSPACE/ticks"
echo '{"ticked": true}'
"""


def wait_until(pred, timeout, what, step=0.05):
    deadline = time.time() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.time() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(step)


class Proc:
    """One child process; stdout/stderr to files under `logs`."""

    def __init__(self, name, argv, logs, env=None):
        self.name, self.argv, self.logs, self.env = name, argv, logs, env
        self.p = None
        self.starts = 0

    def start(self):
        self.starts += 1
        base = os.path.join(self.logs, "%s.%d" % (self.name, self.starts))
        self.out_path = base + ".out"
        self.err_path = base + ".err"
        with open(self.out_path, "w") as out, open(self.err_path, "w") as err:
            self.p = subprocess.Popen(self.argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=self.env)
        return self

    def out(self):
        with open(self.out_path) as f:
            return f.read()

    def describe(self):
        with open(self.err_path) as f:
            err = f.read()
        return "--- %s stdout:\n%s\n--- stderr:\n%s" % (self.name, self.out()[-3000:], err[-3000:])

    def wait_up(self, marker="is up", timeout=60):
        def up():
            if self.p.poll() is not None:
                raise AssertionError("%s exited %s\n%s" % (self.name, self.p.returncode, self.describe()))
            return marker in self.out()
        wait_until(up, timeout, self.name + " to start")
        return self

    def kill9(self):
        if self.p and self.p.poll() is None:
            self.p.send_signal(signal.SIGKILL)
            self.p.wait()

    def stop(self, timeout=60):
        if self.p and self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill9()
                raise AssertionError(self.name + " did not stop on SIGTERM\n" + self.describe())


def run(argv, timeout=120):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise AssertionError("%s exited %d\n%s\n%s" % (" ".join(argv), r.returncode, r.stdout, r.stderr))
    return r.stdout


class Scratch:
    def __init__(self, tag):
        self.path = tempfile.mkdtemp(prefix="tollgate-dist-%s-" % tag)
        self.logs = os.path.join(self.path, "logs")
        os.makedirs(self.logs)
        self.policy = os.path.join(self.path, "policy.yaml")
        with open(self.policy, "w") as f:
            f.write(POLICY)
        self.tools = os.path.join(self.path, "tools")
        os.makedirs(os.path.join(self.tools, "tick"))
        run_path = os.path.join(self.tools, "tick", "run")
        with open(run_path, "w") as f:
            f.write(TICK)
        os.chmod(run_path, 0o755)
        self.workspaces = os.path.join(self.path, "workspaces")

    def sub(self, name):
        return os.path.join(self.path, name)

    def remove(self):
        if not os.environ.get("TOLLGATE_KEEP_DIST_DIRS"):
            shutil.rmtree(self.path, ignore_errors=True)


class Distributed:
    """`tollgate broker`, the keeper, and named stage processes."""

    def __init__(self, scratch, env=None):
        self.s = scratch
        self.env = env
        self.procs = {}
        # A fixed bootstrap port (`--port`), as an operator would give it.
        port = free_port()
        self.broker = Proc("broker", [BIN, "broker", "--data", scratch.sub("broker"), "--port", str(port)],
                           scratch.logs, env).start()
        self.bootstrap = wait_until(lambda: self.broker.out().strip().splitlines()[0]
                                    if self.broker.out().strip() else None, 60, "the broker")
        assert self.bootstrap == "127.0.0.1:%d" % port, self.bootstrap
        self.keeper = self.stage("audit", "keeper")
        wait_until(self.api, 30, "the keeper's endpoints")
        with open(os.path.join(scratch.sub("keeper"), "admin.token")) as f:
            self.admin_token = f.read().strip()

    def api(self):
        """The keeper's HTTP API (a restarted keeper listens elsewhere)."""
        ep = _read_json(os.path.join(self.s.sub("keeper"), "endpoints.json"))
        return ep.get("http") if ep else None

    def stage(self, name, instance, start=True):
        argv = [BIN, "stage", name, "--brokers", self.bootstrap, "--data", self.s.sub(instance)] + (["--durability", os.environ["DUR"]] if os.environ.get("DUR") else []) + [
                "--policy", self.s.policy]
        if instance != "keeper":  # the first keeper makes the deployment's key
            argv += ["--deployment-key", os.path.join(self.s.sub("keeper"), "keys", "events.key")]
        if name != "audit":
            argv += ["--metrics", "127.0.0.1:0"]
        if name == "execute":
            argv += ["--tools-dir", self.s.tools, "--workspaces", self.s.workspaces]
        p = Proc(instance, argv, self.s.logs, self.env)
        self.procs[instance] = p
        if start:
            p.start().wait_up()
        return p

    def metrics(self, instance):
        """GET /metrics of a stage process (its URL is in its endpoints.json)."""
        ep = _read_json(os.path.join(self.s.sub(instance), "endpoints.json"))
        req = urllib.request.Request(ep["metrics"], headers={"Authorization": "Bearer " + self.admin_token})
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.read().decode()

    def start_pipeline(self, executes=2):
        for name in ("ingest", "decide", "approve"):
            self.stage(name, name)
        for i in range(executes):
            self.stage("execute", "execute-%d" % (i + 1))

    def stop(self):
        for p in list(self.procs.values()):
            p.kill9()
        self.broker.kill9()


class Embedded:
    """`tollgate up` on its own embedded broker."""

    def __init__(self, scratch):
        self.s = scratch
        data = scratch.sub("up")
        self.up = Proc("up", [BIN, "up", "--data", data, "--policy", scratch.policy, "--tools-dir", scratch.tools,
                              "--workspaces", scratch.workspaces + "-up"], scratch.logs).start()
        self.up.wait_up("tollgate is up")
        ep = _read_json(os.path.join(data, "endpoints.json"))
        self.bootstrap, self.api = ep["bootstrap"], ep["http"]
        with open(os.path.join(data, "admin.token")) as f:
            self.admin_token = f.read().strip()
        self.data = data

    def stop(self):
        self.up.stop()


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def add_agent(data_dir, agent):
    run([BIN, "agents", "add", "--data", data_dir, "--org", ORG, "--agent", agent])
    path = os.path.join(data_dir, "keys", ORG, agent + ".pem")
    with open(path, "rb") as f:
        key = serialization.load_pem_private_key(f.read(), password=None)
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return key, hashlib.sha256(raw).hexdigest()[:16]


def read_topic(bootstrap, topic, timeout=30):
    """Every committed message of `topic` now, as JSON values."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader-%f" % time.time(),
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "enable.partition.eof": True})
    c.subscribe([topic])
    out, eof, deadline = [], set(), time.time() + timeout
    while time.time() < deadline:
        m = c.poll(0.1)
        if m is None:
            continue
        if m.error():
            if m.error().code() == -191:  # _PARTITION_EOF
                eof.add(m.partition())
                if out and len(eof) >= len(c.assignment()):
                    break
            continue
        out.append(json.loads(m.value()))
    c.close()
    return out


def new_key():
    """A fresh Ed25519 key and its key id (as an attacker would make one)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    key = Ed25519PrivateKey.generate()
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return key, hashlib.sha256(raw).hexdigest()[:16]


def public_key_b64(key):
    import base64
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def workload(agents, per_agent, tag="w"):
    """Requests in the order each agent sends them: ticks (a mutating CLI
    tool), echoes, a write_file that asks every 7th, a denied delete; past 12
    calls a session's budget denies."""
    out = []
    for i in range(per_agent):
        for a in range(agents):
            agent = "agent-%d" % a
            rid = "%s-%s-%03d" % (tag, agent, i)
            session = "sess-%s-%d" % (agent, i // 10)
            if i % 7 == 3:
                tool, args = "write_file", {"path": "notes/%s.txt" % rid, "content": "hi %d" % i}
            elif i % 11 == 5:
                tool, args = "delete_file", {"path": "/etc/shadow"}
            elif i % 2 == 0:
                tool, args = "cli:tick", {"i": i}
            else:
                tool, args = "echo", {"text": "hello %d" % i}
            out.append({"request_id": rid, "org_id": ORG, "agent_id": agent, "session_id": session,
                        "tool": tool, "args": args})
    return out


class Fleet:
    """The agents: publish signed requests, approve what asks, read results."""

    def __init__(self, bootstrap, api, admin_token, keys, prefix="tollgate."):
        self.bootstrap, self.api, self.token, self.keys, self.prefix = bootstrap, api, admin_token, keys, prefix
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                  "partitioner": "murmur2_random"})
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "fleet-%d" % os.getpid(),
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                  "isolation.level": "read_committed"})
        # The org's own results topic (made now if no result made it yet);
        # only what the gate signed counts (docs/trust.md).
        topic = prefix + "results." + ORG
        self.producer.list_topics(topic=topic, timeout=10)
        self.consumer.subscribe([topic])
        self.gate = None  # the gate's public key, from GET /v1/gate-key
        self.refused = 0  # messages on the topic the gate did not sign
        self.pending = {}  # request_id -> the last signed `pending` message
        self.results = {}  # request_id -> [result, ...] (every copy seen)
        self.approved = set()

    def send(self, req):
        key, kid = self.keys[req["agent_id"]]
        value = json.dumps(req).encode()
        claims = {"org_id": req["org_id"], "agent_id": req["agent_id"], "request_id": req["request_id"],
                  "value_sha256": hashlib.sha256(value).hexdigest(), "iat": int(time.time())}
        token = jwt.encode(claims, key, algorithm="EdDSA", headers={"kid": kid})
        self.producer.produce(self.prefix + "requests", key=req["agent_id"], value=value,
                              headers=[("request_id", req["request_id"]), ("session_id", req["session_id"]),
                                       ("tollgate-auth", token if isinstance(token, str) else token.decode())])
        self.producer.poll(0)

    def flush(self):
        self.producer.flush(30)

    def http(self, method, path, body=None):
        api = self.api() if callable(self.api) else self.api
        req = urllib.request.Request(api + path, method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": "Bearer " + self.token,
                                              "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read() or b"null")

    def approve_pending(self):
        pending = self.http("GET", "/v1/approvals?org=" + ORG).get("approvals", [])
        for p in pending:
            rid = p["request_id"]
            if rid in self.approved:
                continue
            self.http("POST", "/v1/approvals/" + rid + "?org=" + ORG,
                      {"decision": "approve", "args_hash": p["args_hash"], "comment": "test"})
            self.approved.add(rid)

    def poll(self, seconds=0.2):
        end = time.time() + seconds
        while time.time() < end:
            m = self.consumer.poll(0.05)
            if m is None or m.error():
                continue
            res = self.verified(m)
            if res is None:
                self.refused += 1
                continue
            if res.get("status") == "pending":
                self.pending[res.get("request_id")] = res
                continue
            # Where each copy came from, to say which stage sent a second.
            res["_seen"] = {"partition": m.partition(), "offset": m.offset(),
                            "source": dict(m.headers() or []).get("tollgate_source", b"").decode()}
            self.results.setdefault(res.get("request_id"), []).append(res)

    def verified(self, m):
        """The result in message `m` if the gate signed it (PyJWT checks the signature), else None."""
        if self.gate is None:
            pub = self.http("GET", "/v1/gate-key")["public_key"]
            raw = base64.urlsafe_b64decode(pub + "=" * (-len(pub) % 4))
            self.gate = Ed25519PublicKey.from_public_bytes(raw)
        token = dict(m.headers() or []).get("tollgate-result-sig")
        try:
            claims = jwt.decode(token, self.gate, algorithms=["EdDSA"])
            res = json.loads(m.value())
        except Exception:  # no header, a bad signature, bad JSON
            return None
        if claims.get("value_sha256") != hashlib.sha256(m.value()).hexdigest() or \
                any(claims.get(k) != res.get(k) for k in ("org_id", "agent_id", "request_id", "status")):
            return None
        return res

    def wait_all(self, ids, timeout=120, approve=True):
        deadline = time.time() + timeout
        last_approve = 0
        while time.time() < deadline:
            self.poll(0.2)
            if approve and time.time() - last_approve > 0.5:
                try:
                    self.approve_pending()
                except OSError:
                    pass  # the keeper is restarting
                last_approve = time.time()
            if all(i in self.results for i in ids):
                # Linger: a duplicate sent late would show up now.
                self.poll(1.0)
                return
        missing = [i for i in ids if i not in self.results]
        raise AssertionError("%d of %d requests have no result, e.g. %s" % (len(missing), len(ids), missing[:5]))

    def close(self):
        self.consumer.close()


def log_events(data_dir):
    """Every event of the log at DATA/log, in seq order (`tollgate audit export`)."""
    out = run([BIN, "audit", "export", "--data", os.path.join(data_dir, "log")])
    lines = [json.loads(line) for line in out.splitlines() if line.strip()]
    return [e for e in lines if "type" in e]  # the first line is the export's header


def verify(data_dir):
    return run([BIN, "audit", "verify", "--data", os.path.join(data_dir, "log")])


def ticks(workspaces):
    """request_id -> how many times cli:tick ran for it, over every workspace."""
    counts = {}
    for root, _, files in os.walk(workspaces):
        for f in files:
            if f == "ticks":
                with open(os.path.join(root, f)) as fh:
                    for line in fh:
                        counts[line.strip()] = counts.get(line.strip(), 0) + 1
    return counts
