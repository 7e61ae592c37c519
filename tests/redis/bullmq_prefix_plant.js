// Writes a BullMQ keyspace under a custom key prefix (Queue/Worker option `prefix`, default 'bull':
// src/classes/queue-keys.ts), with BullMQ itself (tests/redis/test_custom_prefixes.py runs it; argv: redis
// url, prefix). Planted: one dedup id completed twice, an active job whose worker died (lock expired).
// Look-alikes: a dedup id completed once (its second add dropped), an active job whose lock is held.
const { Queue, Worker } = require('bullmq');
const url = new URL(process.argv[2]);
const prefix = process.argv[3];
const conn = { host: url.hostname, port: Number(url.port || 6379), db: Number(url.pathname.slice(1) || 0) };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function drain(queue, processor) {
  const w = new Worker(queue.name, processor, { connection: conn, prefix });
  for (let i = 0; i < 400; i++) {
    const c = await queue.getJobCounts('wait', 'active', 'prioritized');
    if (c.wait + c.active + c.prioritized === 0) break;
    await sleep(25);
  }
  await w.close();
}

async function main() {
  const q = new Queue('payments', { connection: conn, prefix });
  const ok = async () => ({ ok: true });
  await q.add('charge', { order: 42 }, { deduplication: { id: 'charge-42' } });
  await drain(q, ok);
  await q.add('charge', { order: 42 }, { deduplication: { id: 'charge-42' } });
  await drain(q, ok);
  await q.add('charge', { order: 43 }, { deduplication: { id: 'charge-43', ttl: 600000 } });
  await drain(q, ok);
  await q.add('charge', { order: 43 }, { deduplication: { id: 'charge-43', ttl: 600000 } });
  await q.add('ship', { order: 9 }, { jobId: 'ship-9' });
  const dead = new Worker('payments', null, { connection: conn, prefix, lockDuration: 300 });
  await dead.getNextJob('token-of-a-dead-worker');
  await q.add('ship', { order: 10 }, { jobId: 'ship-10' });
  const live = new Worker('payments', null, { connection: conn, prefix, lockDuration: 600000 });
  await live.getNextJob('token-of-a-live-worker');
  await sleep(600);
  await dead.close(true);
  await live.close(true);
  await q.close();
}

main()
  .then(() => process.exit(0))
  .catch((e) => { console.error(e); process.exit(1); });
