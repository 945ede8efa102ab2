// An SDK v2 client with the Tasks extension's requester (ext-tasks), for the
// tests of asked calls as tasks. ext-tasks sends tools/call and tasks/* of
// revision 2026-07-28 itself (the SDK's Client rejects a `task` result), so
// it needs a raw dispatch on the client's own transport: CoordinatedTransport
// wraps any SDK transport, numbers its requests in an id space of its own
// and takes their responses before the SDK sees them.
import { Client } from '@modelcontextprotocol/client';
import { createTaskSessionFromClient } from '@modelcontextprotocol/ext-tasks/client';

export class CoordinatedTransport {
  #inner;
  #pending = new Map();
  #next = 0;

  constructor(inner) {
    this.#inner = inner;
    inner.onmessage = (msg, extra) => {
      if (msg && !('method' in msg) && 'id' in msg && this.#pending.has(msg.id)) {
        const p = this.#pending.get(msg.id);
        this.#pending.delete(msg.id);
        return p.resolve(msg);
      }
      this.onmessage?.(msg, extra);
    };
    inner.onclose = () => {
      for (const p of this.#pending.values()) p.reject(new Error('transport closed'));
      this.#pending.clear();
      this.onclose?.();
    };
    inner.onerror = (e) => this.onerror?.(e);
  }

  start() { return this.#inner.start(); }
  send(message, options) { return this.#inner.send(message, options); }
  close() { return this.#inner.close(); }
  get sessionId() { return this.#inner.sessionId; }
  setProtocolVersion(v) { this.#inner.setProtocolVersion?.(v); }

  // ext-tasks' RawClientDispatch.
  dispatch = async (request, options = {}) => {
    const id = `tasks-${++this.#next}`; // strings: never one of the SDK's numeric ids
    const response = new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      options.signal?.addEventListener('abort', () => {
        this.#pending.delete(id);
        reject(options.signal.reason ?? new Error('aborted'));
      }, { once: true });
    });
    await this.#inner.send({ jsonrpc: '2.0', id, method: request.method, ...(request.params ? { params: request.params } : {}) });
    const msg = await response;
    return 'error' in msg ? { kind: 'error', error: msg.error } : { kind: 'result', result: msg.result };
  };
}

// A pinned 2026-07-28 client on `inner` and its task session.
export async function connectWithTasks(inner, name = 'tasks-test') {
  const clientInfo = { name, version: '1.0.0' };
  const clientCapabilities = {};
  const transport = new CoordinatedTransport(inner);
  const client = new Client(clientInfo, {
    capabilities: clientCapabilities,
    versionNegotiation: { mode: { pin: '2026-07-28' } },
  });
  await client.connect(transport);
  const session = createTaskSessionFromClient(client, {
    endpointId: 'tollgate-test',
    rawDispatch: transport.dispatch,
    v2RequestFraming: { protocolVersion: client.getNegotiatedProtocolVersion(), clientInfo, clientCapabilities },
  });
  return { client, session, transport };
}
