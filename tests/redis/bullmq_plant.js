// Writes a BullMQ keyspace with planted incidents and clean look-alikes, with BullMQ itself
// (tests/redis/test_bullmq.py runs it; argv: redis url, scenario "incidents" | "remove-on-complete" |
// "jobid-rerun").
// Only BullMQ's public API: Queue.add, Worker (with and without a processor), getNextJob.
const { Queue, Worker } = require('bullmq');
const url = new URL(process.argv[2]);
const conn = { host: url.hostname, port: Number(url.port || 6379), db: Number(url.pathname.slice(1) || 0) };
const scenario = process.argv[3] || 'incidents';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function drain(queue, processor) {
  // a worker that runs until nothing is waiting or active, then stops
  const w = new Worker(queue.name, processor, { connection: conn });
  for (let i = 0; i < 400; i++) {
    const c = await queue.getJobCounts('wait', 'active', 'prioritized');
    if (c.wait + c.active + c.prioritized === 0) break;
    await sleep(25);
  }
  await w.close();
}

async function incidents() {
  const q = new Queue('payments', { connection: conn });
  const ok = async () => ({ ok: true });
  // planted: one dedup id completed twice (simple mode: the dedup key goes when the first finishes)
  await q.add('charge', { order: 42, cents: 1999 }, { deduplication: { id: 'charge-42' } });
  await drain(q, ok);
  await q.add('charge', { order: 42, cents: 1999 }, { deduplication: { id: 'charge-42' } });
  await drain(q, ok);
  // look-alike: a dedup id completed once; the second add inside its 10 min window is dropped
  await q.add('charge', { order: 43, cents: 500 }, { deduplication: { id: 'charge-43', ttl: 600000 } });
  await drain(q, ok);
  await q.add('charge', { order: 43, cents: 500 }, { deduplication: { id: 'charge-43', ttl: 600000 } });
  // planted: failed after its 3 attempts; look-alike: failed once, then completed
  await q.add('refund', { order: 7 }, { attempts: 3, jobId: 'refund-7' });
  await drain(q, async () => { throw new Error('card declined'); });
  await q.add('refund', { order: 8 }, { attempts: 3, jobId: 'refund-8' });
  await drain(q, async (job) => { if (job.attemptsMade === 0) throw new Error('gateway timeout'); return 'ok'; });
  // planted: an active job whose worker died (its 300 ms lock expired, never renewed)
  await q.add('ship', { order: 9 }, { jobId: 'ship-9' });
  const dead = new Worker('payments', null, { connection: conn, lockDuration: 300 });
  await dead.getNextJob('token-of-a-dead-worker');
  // look-alike: an active job whose worker holds its lock
  await q.add('ship', { order: 10 }, { jobId: 'ship-10' });
  const live = new Worker('payments', null, { connection: conn, lockDuration: 600000 });
  await live.getNextJob('token-of-a-live-worker');
  await sleep(600);
  // look-alikes: a waiting and a delayed job in another queue
  const mail = new Queue('mail', { connection: conn });
  await mail.add('email', { to: 'a@example.com' }, { delay: 3600000, deduplication: { id: 'welcome-a' } });
  await mail.add('email', { to: 'b@example.com' });
  // look-alike: a job scheduler's runs (job ids repeat:<scheduler>:<ms>), each its own job
  const reports = new Queue('reports', { connection: conn });
  await reports.upsertJobScheduler('nightly', { every: 200 }, { name: 'report', data: {} });
  const rw = new Worker('reports', async () => 'sent', { connection: conn });
  for (let i = 0; i < 200 && (await reports.getJobCounts('completed')).completed < 3; i++) await sleep(25);
  await reports.removeJobScheduler('nightly');
  await rw.close();
  await reports.close();
  await dead.close(true);
  await live.close(true);
  await mail.close();
  await q.close();
}

async function removeOnComplete() {
  // completed jobs are deleted: the second run of one dedup id leaves no record
  const q = new Queue('orders', { connection: conn });
  const opts = { deduplication: { id: 'order-1' }, removeOnComplete: true };
  await q.add('place', { order: 1 }, opts);
  await drain(q, async () => 'placed');
  await q.add('place', { order: 1 }, opts);
  await drain(q, async () => 'placed');
  await q.add('place', { order: 2 }, { removeOnComplete: true, delay: 3600000 });
  await q.close();
}

async function jobIdRerun() {
  // BullMQ refuses an add whose jobId's hash exists (handleDuplicatedJob.lua); removeOnComplete deletes
  // the hash when the job completes, so the same jobId added again runs again
  const q = new Queue('invoices', { connection: conn });
  const ok = async () => 'sent';
  await q.add('send', { invoice: 5 }, { jobId: 'invoice-5', removeOnComplete: true });
  await drain(q, ok);
  await q.add('send', { invoice: 5 }, { jobId: 'invoice-5', removeOnComplete: true });
  await drain(q, ok);
  // look-alikes: a jobId completed once and removed; a jobId kept on completion, its re-add refused
  await q.add('send', { invoice: 6 }, { jobId: 'invoice-6', removeOnComplete: true });
  await drain(q, ok);
  await q.add('send', { invoice: 7 }, { jobId: 'invoice-7' });
  await drain(q, ok);
  await q.add('send', { invoice: 7 }, { jobId: 'invoice-7' });
  await drain(q, ok);
  await q.close();
}

const scenarios = { incidents, 'remove-on-complete': removeOnComplete, 'jobid-rerun': jobIdRerun };
scenarios[scenario]()
  .then(() => process.exit(0))
  .catch((e) => { console.error(e); process.exit(1); });
