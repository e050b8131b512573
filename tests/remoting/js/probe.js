'use strict';
// A real third-party RocketMQ client (ali-ons) pointed at one NameServer, for the Python tests.
// Usage: node probe.js <command> --namesrv 127.0.0.1:PORT [--access-key K --secret S] [--timeout MS] [options]
// Prints exactly one JSON line on stdout: the result, or {"error": ...} with exit status 1.
//
//   route TOPIC                                   GET_ROUTEINFO_BY_TOPIC through MQClientAPI.getTopicRouteInfoFromNameServer
//   cluster-info                                  GET_BROKER_CLUSTER_INFO (106)
//   register-broker --cluster C --broker-name B --broker-id N --broker-addr H:P --topics T1,T2
//                   [--compressed] [--ha-addr H:P] [--counter N] [--timestamp MS] [--queues N] [--perm N] [--no-crc]
//   unregister-broker --cluster C --broker-name B --broker-id N --broker-addr H:P
//   heartbeat --cluster C --broker-name B --broker-addr H:P [--broker-id N]
//             BROKER_HEARTBEAT (904) oneway; with --query: QUERY_DATA_VERSION (322) [--counter N --timestamp MS]
//   kv-put --namespace NS --key K --value V       PUT_KV_CONFIG (100)
//   kv-get --namespace NS --key K                 GET_KV_CONFIG (101)
//   raw --code N [--ext k=v ...] [--body TEXT] [--oneway]
//   sign [--ext k=v ...] [--body TEXT] --access-key K --secret S
//             offline: runs ali-ons' own Channel#beforeRequest on a command and prints the ext fields it produced
//
// Every request goes through ali-ons' RemotingCommand and its remoting client/channel, so framing, JSON header,
// version (121) and the ACL signature are exactly what ali-ons sends. No network beyond the loopback name server:
// the address must be 127.x.x.x or localhost, and ali-ons' HTTP address-server lookup is replaced by a stub
// that throws.

const { createRequire } = require('module');
const zlib = require('zlib');

const MQClientAPI = require('ali-ons/lib/mq_client_api');
const Channel = require('ali-ons/lib/channel');
const RemotingCommand = require('ali-ons/lib/protocol/command/remoting_command');
// ali-ons reads fastjson bodies (bare numeric map keys) with JSON2 rather than JSON.parse; use the same parser.
const JSON2 = createRequire(require.resolve('ali-ons/lib/mq_client_api'))('JSON2');

const FLAGS = new Set([ 'compressed', 'oneway', 'query', 'no-crc' ]);

function parseArgs(argv) {
  const opts = { _: [], ext: [] };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (!arg.startsWith('--')) {
      opts._.push(arg);
      continue;
    }
    const name = arg.slice(2);
    if (FLAGS.has(name)) {
      opts[name] = true;
      continue;
    }
    if (i + 1 >= argv.length) throw new Error(`option --${name} needs a value`);
    const value = argv[++i];
    if (name === 'ext') opts.ext.push(value);
    else opts[name] = value;
  }
  return opts;
}

function required(opts, name) {
  if (opts[name] === undefined) throw new Error(`missing --${name}`);
  return opts[name];
}

function intOpt(opts, name, dflt) {
  if (opts[name] === undefined) return dflt;
  const n = Number(opts[name]);
  if (!Number.isSafeInteger(n)) throw new Error(`--${name} must be an integer`);
  return n;
}

function extHeader(opts) {
  const header = {};
  for (const kv of opts.ext) {
    const eq = kv.indexOf('=');
    if (eq < 1) throw new Error(`--ext wants key=value, got ${kv}`);
    header[kv.slice(0, eq)] = kv.slice(eq + 1);
  }
  return header;
}

// CRC32 & 0x7FFFFFFF as RocketMQ's UtilAll.crc32; zlib.crc32 exists from Node 20.15/22.2, a table otherwise.
let crcTable = null;
function crc32(buf) {
  if (typeof zlib.crc32 === 'function') return (zlib.crc32(buf) & 0x7fffffff) >>> 0;
  if (!crcTable) {
    crcTable = new Int32Array(256);
    for (let n = 0; n < 256; n++) {
      let c = n;
      for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
      crcTable[n] = c;
    }
  }
  let crc = -1;
  for (let i = 0; i < buf.length; i++) crc = crcTable[(crc ^ buf[i]) & 0xff] ^ (crc >>> 8);
  return ((crc ^ -1) & 0x7fffffff) >>> 0;
}

function int32(n) {
  const b = Buffer.alloc(4);
  b.writeInt32BE(n);
  return b;
}

function lengthPrefixed(text) {
  const b = Buffer.from(text, 'utf8');
  return [ int32(b.length), b ];
}

function topicConfigs(opts) {
  const queues = intOpt(opts, 'queues', 8);
  const perm = intOpt(opts, 'perm', 6);
  return required(opts, 'topics').split(',').filter(Boolean).map(topicName => ({
    // fastjson's field order (alphabetical), as a Java broker would write it
    attributes: {},
    order: false,
    perm,
    readQueueNums: queues,
    topicFilterType: 'SINGLE_TAG',
    topicName,
    topicSysFlag: 0,
    writeQueueNums: queues,
  }));
}

function dataVersion(opts) {
  return { counter: intOpt(opts, 'counter', 1), stateVersion: 0, timestamp: intOpt(opts, 'timestamp', Date.now()) };
}

// RegisterBrokerBody: fastjson JSON, or (compressed) the zlib stream of RegisterBrokerBody.encode(true) for a broker
// older than V5_0_0 - ali-ons announces version 121, so no TopicQueueMappingInfo section follows the filter list.
function registerBody(opts) {
  const topics = topicConfigs(opts);
  const version = dataVersion(opts);
  if (!opts.compressed) {
    const table = {};
    for (const t of topics) table[t.topicName] = t;
    return Buffer.from(JSON.stringify({
      filterServerList: [],
      topicConfigSerializeWrapper: { dataVersion: version, topicConfigTable: table },
    }), 'utf8');
  }
  const parts = [ ...lengthPrefixed(JSON.stringify(version)), int32(topics.length) ];
  for (const t of topics) {
    // TopicConfig.encode(): space-separated; topicSysFlag and order are not carried
    const line = [ t.topicName, t.readQueueNums, t.writeQueueNums, t.perm, t.topicFilterType,
      JSON.stringify(t.attributes) ].join(' ');
    parts.push(...lengthPrefixed(line));
  }
  parts.push(...lengthPrefixed('[]'));
  return zlib.deflateSync(Buffer.concat(parts), { level: 9 });
}

function brokerHeader(opts) {
  return {
    brokerName: required(opts, 'broker-name'),
    brokerAddr: required(opts, 'broker-addr'),
    clusterName: required(opts, 'cluster'),
    brokerId: intOpt(opts, 'broker-id', 0),
  };
}

function bodyValue(body) {
  if (!body || !body.length) return null;
  const text = body.toString('utf8');
  try {
    return JSON2.parse(text);
  } catch (err) {
    return text;
  }
}

function summarize(request, response) {
  const out = {
    request: {
      code: request.code,
      opaque: request.opaque,
      version: request.version,
      flag: request.flag,
      extFields: request.extFields,
      bodyLength: request.body ? request.body.length : 0,
    },
  };
  if (response) {
    out.response = {
      code: response.code,
      opaque: response.opaque,
      flag: response.flag,
      remark: response.remark === undefined ? null : response.remark,
      extFields: response.extFields || {},
      body: bodyValue(response.body),
    };
  }
  return out;
}

function checkLoopback(addr) {
  if (!/^(127\.\d{1,3}\.\d{1,3}\.\d{1,3}|localhost):\d{1,5}$/.test(addr)) {
    throw new Error(`--namesrv must be a loopback host:port, got ${addr}`);
  }
}

const quietLogger = {
  info() {},
  debug() {},
  warn(...args) { console.error('[ali-ons warn]', ...args); },
  error(...args) { console.error('[ali-ons error]', ...args); },
};

const noHttp = {
  request() {
    throw new Error('probe: the HTTP name-server address lookup is disabled');
  },
};

async function send(api, command, timeout, oneway) {
  if (oneway) {
    command.markOnewayRPC();
    await api.invokeOneway(null, command);
    // tcp-base writes oneway packets straight to the socket; end() resolves once they are handed to the kernel.
    const channel = api._channels.get(api._namesrvAddrList[api._index]);
    if (channel && channel._socket) await new Promise(resolve => channel._socket.end(resolve));
    return null;
  }
  return api.invoke(null, command, timeout);
}

function signOffline(opts) {
  const command = RemotingCommand.createRequestCommand(intOpt(opts, 'code', 0), extHeader(opts));
  if (opts.body !== undefined) command.body = Buffer.from(opts.body, 'utf8');
  // beforeRequest only reads accessKey / secretKey / onsChannel from `this`; no socket is opened.
  const fakeChannel = { accessKey: required(opts, 'access-key'), secretKey: required(opts, 'secret'), onsChannel: 'ALIYUN' };
  Channel.prototype.beforeRequest.call(fakeChannel, command);
  command.makeCustomHeaderToNet();
  return { command: 'sign', extFields: command.extFields, header: JSON.parse(command.buildHeader().toString('utf8')) };
}

async function run(opts) {
  const [ command, ...args ] = opts._;
  if (command === 'sign') return signOffline(opts);
  const namesrv = required(opts, 'namesrv');
  checkLoopback(namesrv);
  const timeout = intOpt(opts, 'timeout', 3000);
  const api = new MQClientAPI({
    nameSrv: namesrv,
    httpclient: noHttp,
    logger: quietLogger,
    responseTimeout: timeout,
    accessKeyId: opts['access-key'],
    accessKeySecret: opts.secret,
  });
  try {
    await api.ready();
    const started = Date.now();
    let result;
    switch (command) {
      case 'route': {
        const topic = args[0];
        if (!topic) throw new Error('route needs a TOPIC');
        result = { route: (await api.getTopicRouteInfoFromNameServer(topic, timeout)) || null };
        break;
      }
      case 'cluster-info': {
        const request = RemotingCommand.createRequestCommand(106, null);
        result = summarize(request, await send(api, request, timeout, false));
        break;
      }
      case 'register-broker': {
        const header = brokerHeader(opts);
        header.haServerAddr = opts['ha-addr'] || header.brokerAddr;
        header.compressed = Boolean(opts.compressed);
        const body = registerBody(opts);
        header.bodyCrc32 = opts['no-crc'] ? 0 : crc32(body);
        const request = RemotingCommand.createRequestCommand(103, header);
        request.body = body;
        result = summarize(request, await send(api, request, timeout, false));
        break;
      }
      case 'unregister-broker': {
        const request = RemotingCommand.createRequestCommand(104, brokerHeader(opts));
        result = summarize(request, await send(api, request, timeout, false));
        break;
      }
      case 'heartbeat': {
        const header = brokerHeader(opts);
        if (opts.query) {
          const request = RemotingCommand.createRequestCommand(322, header);
          request.body = Buffer.from(JSON.stringify(dataVersion(opts)), 'utf8');
          result = summarize(request, await send(api, request, timeout, false));
        } else {
          if (opts['broker-id'] === undefined) delete header.brokerId;
          const request = RemotingCommand.createRequestCommand(904, header);
          result = summarize(request, await send(api, request, timeout, true));
        }
        break;
      }
      case 'kv-put': {
        const request = RemotingCommand.createRequestCommand(100, {
          namespace: required(opts, 'namespace'), key: required(opts, 'key'), value: required(opts, 'value'),
        });
        result = summarize(request, await send(api, request, timeout, false));
        break;
      }
      case 'kv-get': {
        const request = RemotingCommand.createRequestCommand(101, {
          namespace: required(opts, 'namespace'), key: required(opts, 'key'),
        });
        result = summarize(request, await send(api, request, timeout, false));
        break;
      }
      case 'raw': {
        const request = RemotingCommand.createRequestCommand(intOpt(opts, 'code'), extHeader(opts));
        if (request.code === undefined) throw new Error('raw needs --code');
        if (opts.body !== undefined) request.body = Buffer.from(opts.body, 'utf8');
        result = summarize(request, await send(api, request, timeout, Boolean(opts.oneway)));
        break;
      }
      default:
        throw new Error(`unknown command ${command}`);
    }
    result.command = command;
    result.elapsedMs = Date.now() - started;
    return result;
  } finally {
    await api.close();
  }
}

function finish(obj, status) {
  process.stdout.write(JSON.stringify(obj) + '\n', () => process.exit(status));
}

const guard = setTimeout(() => finish({ error: 'probe timed out' }, 1), 20000);
guard.unref();

let opts;
try {
  opts = parseArgs(process.argv.slice(2));
} catch (err) {
  finish({ error: err.message }, 1);
}
if (opts) {
  run(opts).then(
    result => finish(result, 0),
    err => finish({ error: err.message, name: err.name, code: err.code === undefined ? null : err.code }, 1)
  );
}
