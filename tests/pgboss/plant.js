// pg-boss itself writes a test ledger for tests/presets/test_pgboss_real.py (issue 26: "tried with
// pg-boss 10.4 itself on Node 20, a job whose worker was killed stays active with its own 3 s limit").
//
//   node plant.js CONNECTION_STRING [MODULE [heartbeat]]
//   MODULE: pg-boss (10.4, the default), pg-boss-11 or pg-boss-12; heartbeat: plant heartbeat leases (12.12+)
//
// Uses only pg-boss's public API (send, sendThrottled, fetch, complete, fail, work). Maintenance and
// cron are off (supervise: false, schedule: false), so nothing but this script changes a job. Prints
// one JSON line per planted job ({"plant": NAME, "id": UUID}), then "WORKING <id>" once a worker holds
// the doomed job, and waits: the test kills this process with SIGKILL, as an OOM killer or a deploy
// would, so that job stays 'active' past its own 3 s limit.
'use strict'

const fs = require('fs')

const [url, mod = 'pg-boss'] = process.argv.slice(2)
const say = (plant, id) => console.log(JSON.stringify({ plant, id }))

async function runOnce (boss, queue, outcome) {
  // the queue holds exactly one job ready to fetch whenever this is called
  const [job] = await boss.fetch(queue)
  if (!job) throw new Error(`nothing to fetch in ${queue}`)
  if (outcome === 'fail') await boss.fail(queue, job.id, { message: 'card declined' })
  else await boss.complete(queue, job.id, { sent: true })
  return job.id
}

async function main () {
  const m = require(mod)
  const PgBoss = m.PgBoss || m.default || m
  const boss = new PgBoss({ connectionString: url, supervise: false, schedule: false, max: 2 })
  boss.on('error', e => console.error(e))
  await boss.start()
  for (const q of ['send-receipt', 'charge-card']) await boss.createQueue(q)

  // a clean completed job
  say('completed', await boss.send('send-receipt', { orderId: 1 }))
  await runOnce(boss, 'send-receipt', 'complete')

  // a throttled duplicate: the same singleton key in the same slot is refused by pg-boss (null)
  const first = await boss.sendThrottled('send-receipt', { orderId: 2 }, {}, 3600, 'order-2')
  const again = await boss.sendThrottled('send-receipt', { orderId: 2 }, {}, 3600, 'order-2')
  say('throttled', first)
  say('throttled-refused', again)
  await runOnce(boss, 'send-receipt', 'complete')

  // one singleton key without a slot, sent twice on a standard queue: two intended runs
  for (let i = 0; i < 2; i++) {
    say('same-key-no-slot', await boss.send('send-receipt', { orderId: 3 }, { singletonKey: 'order-3' }))
    await runOnce(boss, 'send-receipt', 'complete')
  }

  // a failed job: its retries exhausted (retryLimit 2: three attempts, each failed)
  const failed = await boss.send('charge-card', { orderId: 4 }, { retryLimit: 2, retryDelay: 0 })
  say('failed', failed)
  for (let i = 0; i < 3; i++) await runOnce(boss, 'charge-card', 'fail')

  // failed once, then completed on its retry: a clean look-alike
  say('retried-ok', await boss.send('charge-card', { orderId: 5 }, { retryLimit: 2, retryDelay: 0 }))
  await runOnce(boss, 'charge-card', 'fail')
  await runOnce(boss, 'charge-card', 'complete')

  // active under a live-looking lease: its own 1 h limit, and one with the default 15 min
  say('active-1h', await boss.send('charge-card', { orderId: 6 }, { expireInSeconds: 3600 }))
  await boss.fetch('charge-card')
  say('active-default', await boss.send('charge-card', { orderId: 7 }))
  await boss.fetch('charge-card')

  // pg-boss 12.12+: heartbeat leases. One whose worker stopped beating (fetched, never touched: its
  // own 10 s lease lapses long before its 1 h active-time limit), one under a 10 min lease
  if (process.argv[4] === 'heartbeat') {
    say('heartbeat-lapsed', await boss.send('charge-card', { orderId: 10 }, { expireInSeconds: 3600, heartbeatSeconds: 10 }))
    await boss.fetch('charge-card')
    say('heartbeat-live', await boss.send('charge-card', { orderId: 11 }, { expireInSeconds: 3600, heartbeatSeconds: 600 }))
    await boss.fetch('charge-card')
  }

  // never fetched
  say('created', await boss.send('send-receipt', { orderId: 8 }))

  // the doomed job: its own 3 s limit; a worker takes it and is killed while it runs
  say('killed', await boss.send('charge-card', { orderId: 9 }, { expireInSeconds: 3 }))
  await boss.work('charge-card', { pollingIntervalSeconds: 0.5 }, async jobs => {
    const list = Array.isArray(jobs) ? jobs : [jobs]
    fs.writeSync(1, `WORKING ${list.map(j => j.id).join(',')}\n`)
    // The charge hangs in a synchronous call (as a stuck native driver would): pg-boss's own in-process
    // timer (handler execution exceeded expireInSeconds) cannot fire, so only SIGKILL ends this.
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0)
  })
}

main().catch(e => {
  console.error(e && e.stack ? e.stack : String(e))
  process.exit(1)
})
