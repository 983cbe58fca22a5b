#!/usr/bin/env node
'use strict';
/*
 * CLI driving the REAL ali-ons (npm ali-ons@3.12.0) RocketMQ client; same CLI and JSON lines as
 * tests/interop/cpp_driver.py.
 *
 *   node driver.js produce --namesrv 127.0.0.1:9876 --group PG --topic T --count 10 [--tags TagA]
 *        [--keys-prefix k] [--body-size 64] [--prop k=v ...] [--orderly-key K] [--delay-level L]
 *   node driver.js consume --namesrv ... --group CG --topic T --expect N --timeout S
 *        [--expr "TagA || TagB"] [--broadcast] [--fail-first K] [--from-where first|last|timestamp]
 *        [--max-reconsume-times M] [--linger S]
 *
 * stdout carries only JSON lines; ali-ons' own logging goes to stderr. Exit codes: 0 ok, 1 send
 * failure / consume timeout, 2 bad usage (e.g. --orderly or --batch: ali-ons has neither).
 *
 * ali-ons normally fetches the name-server list over HTTP from an Aliyun "address server"
 * (options.onsAddr). Passing options.nameSrv skips that (RemotingClient.updateNameServerAddressList);
 * on top of that onsAddr points at a closed loopback port and the http client refuses every
 * non-loopback URL, so the driver can never reach the internet.
 */

const path = require('path');
const urllib = require('urllib');
const { Producer, Consumer, Message } = require('ali-ons');
const MQProducer = require('ali-ons/lib/producer/mq_producer');
const ConsumeFromWhere = require('ali-ons/lib/consumer/consume_from_where');

const BOOL_FLAGS = new Set([ 'broadcast', 'orderly', 'batch', 'oneway', 'keep-going', 'verbose' ]);
const LIST_FLAGS = new Set([ 'prop', 'prop-key' ]);

function emit(obj) {
  const sorted = {};
  for (const k of Object.keys(obj).sort()) sorted[k] = obj[k];
  process.stdout.write(JSON.stringify(sorted) + '\n');
}

function usage(msg) {
  process.stderr.write(`driver.js: ${msg}\n`);
  emit({ event: 'summary', ok: false, error: msg });
  process.exitCode = 2;
  return 2;
}

function parseArgs(argv) {
  const cmd = argv[0];
  const opts = { prop: [], 'prop-key': [] };
  for (let i = 1; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) throw new Error(`unexpected argument ${a}`);
    const name = a.slice(2);
    if (BOOL_FLAGS.has(name)) {
      opts[name] = true;
      continue;
    }
    if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
    const value = argv[++i];
    if (LIST_FLAGS.has(name)) opts[name].push(value);
    else opts[name] = value;
  }
  return { cmd, opts };
}

const stderrLogger = verbose => ({
  info: (...args) => { if (verbose) console.error('[ali-ons info]', ...args); },
  debug: () => {},
  warn: (...args) => console.error('[ali-ons warn]', ...args),
  error: (...args) => console.error('[ali-ons error]', ...args),
});

// ali-ons asserts an httpclient even when nameSrv is given; only loopback URLs may pass.
const guardedHttpClient = {
  request(url, options) {
    const host = new URL(url).hostname;
    if (host !== '127.0.0.1' && host !== 'localhost') {
      return Promise.reject(new Error(`driver.js: blocked ali-ons HTTP request to ${url}`));
    }
    return urllib.request(url, options);
  },
};

function clientOptions(opts) {
  return {
    nameSrv: opts.namesrv.split(';').filter(Boolean),
    onsAddr: 'http://127.0.0.1:9/never-used',
    httpclient: guardedHttpClient,
    logger: stderrLogger(!!opts.verbose),
    // ACL: ali-ons signs every request when both keys are set (--access-key / --secret-key)
    ...(opts['access-key'] ? { accessKey: opts['access-key'], secretKey: opts['secret-key'] } : {}),
  };
}

function makeBody(index, size) {
  const base = Buffer.from(`msg-${index}`);
  if (size === undefined) return base;
  if (size <= base.length) return base.slice(0, size);
  return Buffer.concat([ base, Buffer.from('-'), Buffer.alloc(size - base.length - 1, 'x') ]);
}

function bodyFields(body) {
  body = body || Buffer.alloc(0);
  const text = body.toString('utf8');
  if (Buffer.from(text, 'utf8').equals(body)) return { body: text };
  return { body_b64: body.toString('base64') };
}

function withTimeout(promise, ms, what) {
  let timer;
  const guard = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took more than ${ms}ms`)), ms);
  });
  return Promise.race([ promise, guard ]).finally(() => clearTimeout(timer));
}

async function closeDefaultProducer() {
  // Every ali-ons Producer/Consumer also starts a hidden CLIENT_INNER_PRODUCER (its own MQClient).
  if (MQProducer.defaultProducer) {
    await MQProducer.defaultProducer.close();
    MQProducer.defaultProducer = null;
  }
}

async function produce(opts) {
  if (opts.batch) return usage('ali-ons has no batch send');
  if (opts.oneway) return usage('ali-ons has no oneway send');
  const count = Number(opts.count || 1);
  const t0 = Date.now();
  const props = {};
  for (const item of opts.prop) {
    const idx = item.indexOf('=');
    if (idx <= 0) return usage(`--prop expects k=v, got ${item}`);
    props[item.slice(0, idx)] = item.slice(idx + 1);
  }
  const producer = new Producer(Object.assign(clientOptions(opts), {
    producerGroup: opts.group,
    sendMsgTimeout: Number(opts['send-timeout-ms'] || 3000),
  }));
  producer.on('error', err => console.error('[producer error]', err && err.message));
  await producer.ready();
  emit({ event: 'started', client: 'ali-ons', role: 'producer', pid: process.pid });
  let sent = 0;
  let failed = 0;
  for (let i = 0; i < count; i++) {
    const msg = new Message(opts.topic, opts.tags || null, makeBody(i, opts['body-size'] && Number(opts['body-size'])));
    if (!opts.tags) delete msg.properties.TAGS;
    if (opts['keys-prefix']) msg.keys = [ `${opts['keys-prefix']}${i}` ];
    Object.assign(msg.properties, props);
    if (opts['orderly-key'] !== undefined) msg.shardingKey = opts['orderly-key'];
    if (opts['delay-level']) msg.delayTimeLevel = Number(opts['delay-level']);
    try {
      const res = await producer.send(msg);
      sent++;
      emit({
        event: 'sent', index: i, status: res.sendStatus, msg_id: res.msgId,
        queue_id: Number(res.messageQueue.queueId), queue_offset: res.queueOffset,
        broker_name: res.messageQueue.brokerName,
      });
    } catch (err) {
      failed++;
      emit({ event: 'send_error', index: i, error: String(err && err.message || err) });
      if (!opts['keep-going']) break;
    }
  }
  if (opts.linger) await sleep(Number(opts.linger) * 1000);
  await withTimeout(producer.close().then(closeDefaultProducer), shutdownMs(opts), 'producer close');
  const ok = failed === 0 && sent === count;
  emit({ event: 'summary', ok, sent, failed, elapsed: (Date.now() - t0) / 1000 });
  return ok ? 0 : 1;
}

const FROM_WHERE = {
  first: ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
  last: ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
  timestamp: ConsumeFromWhere.CONSUME_FROM_TIMESTAMP,
};

async function consume(opts) {
  if (opts.orderly) return usage('ali-ons has no orderly consumer (it never sends LOCK_BATCH_MQ)');
  const expect = Number(opts.expect);
  const timeoutMs = Number(opts.timeout) * 1000;
  const failFirst = Number(opts['fail-first'] || 0);
  if (!Number.isFinite(expect) || !Number.isFinite(timeoutMs)) return usage('--expect and --timeout are required');
  const fromWhere = FROM_WHERE[opts['from-where'] || 'last'];
  if (!fromWhere) return usage(`--from-where must be one of ${Object.keys(FROM_WHERE).join(', ')}`);
  const consumerOptions = Object.assign(clientOptions(opts), {
    consumerGroup: opts.group,
    isBroadcast: !!opts.broadcast,
    consumeFromWhere: fromWhere,
  });
  if (opts['max-reconsume-times'] !== undefined) consumerOptions.maxReconsumeTimes = Number(opts['max-reconsume-times']);
  const consumer = new Consumer(consumerOptions);
  consumer.on('error', err => console.error('[consumer error]', err && err.message));

  const deliveries = new Map();
  const acked = new Set();
  let total = 0;
  let resolveDone;
  const done = new Promise(resolve => { resolveDone = resolve; });
  const expr = opts.expr && opts.expr !== '*' ? opts.expr : '*';

  consumer.subscribe(opts.topic, expr, async msg => {
    const props = {};
    for (const [ k, v ] of Object.entries(msg.properties || {})) {
      if (v !== null && v !== undefined) props[k] = String(v);
    }
    const identity = props.UNIQ_KEY || props.ORIGIN_MESSAGE_ID || msg.msgId;
    const delivery = (deliveries.get(identity) || 0) + 1;
    deliveries.set(identity, delivery);
    total++;
    const ok = delivery > failFirst;
    if (ok) acked.add(identity);
    emit(Object.assign({
      event: 'message', msg_id: msg.msgId, uniq_key: props.UNIQ_KEY || null, identity,
      topic: msg.topic, tags: msg.tags || '', keys: props.KEYS || '', properties: props,
      queue_id: msg.queueId, queue_offset: msg.queueOffset, commit_log_offset: msg.commitLogOffset,
      reconsume_times: msg.reconsumeTimes, born_timestamp: msg.bornTimestamp,
      store_timestamp: msg.storeTimestamp, born_host: msg.bornHost, store_host: msg.storeHost,
      delivery, acked: ok,
    }, bodyFields(msg.body)));
    if (acked.size >= expect) resolveDone('met');
    return ok ? undefined : Consumer.ACTION_RETRY;
  });

  let signal = 0;
  let stopLinger;
  const signalled = new Promise(resolve => { stopLinger = resolve; });
  for (const sig of [ 'SIGTERM', 'SIGINT' ]) {
    process.on(sig, () => { signal = sig; resolveDone('signal'); stopLinger(); });
  }
  const t0 = Date.now();
  await consumer.ready();
  emit({ event: 'started', client: 'ali-ons', role: 'consumer', pid: process.pid });
  const timer = setTimeout(() => resolveDone('timeout'), Math.max(0, timeoutMs - (Date.now() - t0)));
  const why = await done;
  clearTimeout(timer);
  const met = acked.size >= expect && why === 'met';
  // keep consuming (offset commits every 5 s); a signal cuts it short, as in the C++ driver
  if (met && opts.linger && !signal) await Promise.race([ sleep(Number(opts.linger) * 1000), signalled ]);
  let closeError = null;
  try {
    await withTimeout(consumer.close().then(closeDefaultProducer), shutdownMs(opts), 'consumer close');
  } catch (err) {
    closeError = String(err && err.message || err);
  }
  const summary = {
    event: 'summary', ok: met, distinct: acked.size, deliveries: total, expect,
    signal, elapsed: (Date.now() - t0) / 1000,
  };
  if (closeError) summary.close_error = closeError;
  emit(summary);
  return met ? 0 : 1;
}

function shutdownMs(opts) {
  return Number(opts['shutdown-timeout'] || 20) * 1000;
}

function sleep(ms) {
  return new Promise(resolve => setTimeout(resolve, ms));
}

async function main() {
  let parsed;
  try {
    parsed = parseArgs(process.argv.slice(2));
  } catch (err) {
    return usage(err.message);
  }
  const { cmd, opts } = parsed;
  for (const req of [ 'namesrv', 'group', 'topic' ]) {
    if (!opts[req]) return usage(`--${req} is required`);
  }
  if (cmd === 'produce') return produce(opts);
  if (cmd === 'consume') return consume(opts);
  return usage(`unknown command ${cmd} (expected produce|consume) in ${path.basename(__filename)}`);
}

main().then(code => {
  // ali-ons keeps interval timers alive after close(); exit explicitly once stdout is drained.
  process.stdout.write('', () => process.exit(code));
}, err => {
  emit({ event: 'summary', ok: false, error: String(err && err.stack || err) });
  process.stdout.write('', () => process.exit(1));
});
