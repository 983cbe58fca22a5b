// pocketmq console: one hand-written script, no framework, no build step.
// Pages are hash routes (#/dashboard, #/cluster, #/topics, #/topic/NAME, #/groups, #/group/NAME,
// #/producers, #/messages, #/message?topic=&id=, #/dlq?group=, #/trace, #/acl). Every page reads the JSON API under /api/ (see
// deploy/console/api.py); actions that change the cluster ask for confirmation first, as
// rocketmq-dashboard does. Live charts are inline SVG redrawn from polled figures.
"use strict";

const view = document.getElementById("view");
const statusLine = document.getElementById("status");
let timers = [];  // polling timers of the current page, cleared on navigation

// ------------------------------------------------------------------------------ helpers
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k === "text") node.textContent = v;
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function say(text, kind) {
  statusLine.textContent = text || "";
  statusLine.className = "status" + (kind ? " " + kind : "");
}

async function api(path, options) {
  const opts = Object.assign({ headers: {} }, options || {});
  if (opts.json !== undefined) {
    opts.body = JSON.stringify(opts.json);
    opts.headers["Content-Type"] = "application/json";
    delete opts.json;
  }
  const resp = await fetch(path, opts);
  const data = await resp.json();
  if (!resp.ok) throw new Error(data.error || resp.statusText);
  return data;
}

function fmtTime(ms) {
  return ms > 0 ? new Date(ms).toLocaleString() : "-";
}

function fmtNum(n, digits) {
  if (n === null || n === undefined) return "-";
  return typeof n === "number" ? n.toFixed(digits === undefined ? 0 : digits) : String(n);
}

// a table from rows; columns: [header, row => cell, "num"?]
function table(id, columns, rows, onSort) {
  const head = el("tr", {}, columns.map(([h, , cls], i) =>
    el("th", { class: [cls, onSort ? "sortable" : ""].join(" ").trim() || null,
               onclick: onSort ? () => onSort(i) : null }, h)));
  const body = rows.map(r => el("tr", {}, columns.map(([, f, cls]) => {
    const v = f(r);
    return el("td", { class: cls || null }, v instanceof Node ? v : (v === undefined ? "" : String(v)));
  })));
  return el("table", { id }, el("thead", {}, head), el("tbody", {}, body));
}

function kvTable(id, obj) {
  return table(id, [["key", r => r[0]], ["value", r => r[1]]], Object.entries(obj || {}).sort());
}

// ------------------------------------------------------------------------------- charts
// A live line chart: series = {name: [values...]}; keeps the last `keep` points.
function lineChart(id, title, keep) {
  const colors = ["#2b6cb0", "#dd6b20", "#2f855a", "#805ad5", "#c53030", "#319795"];
  const series = {};
  const box = el("div", { class: "chart", id });
  const w = 640, h = 160, pad = 34;
  function draw() {
    const names = Object.keys(series);
    const all = names.flatMap(n => series[n]);
    const max = Math.max(1, ...all);
    const ns = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(ns, "svg");
    svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
    svg.setAttribute("width", w);
    svg.setAttribute("height", h);
    const axis = document.createElementNS(ns, "line");
    axis.setAttribute("x1", pad); axis.setAttribute("x2", w - pad);
    axis.setAttribute("y1", h - pad + 10); axis.setAttribute("y2", h - pad + 10);
    axis.setAttribute("stroke", "#dde1e8");
    svg.append(axis);
    const label = document.createElementNS(ns, "text");
    label.setAttribute("x", pad); label.setAttribute("y", 14);
    label.textContent = `${title} (max ${fmtNum(max, max < 10 ? 1 : 0)})`;
    svg.append(label);
    names.forEach((n, i) => {
      const pts = series[n];
      const step = (w - 2 * pad) / Math.max(1, keep - 1);
      const d = pts.map((v, j) => `${pad + j * step},${h - pad + 10 - (v / max) * (h - pad - 10)}`).join(" ");
      const line = document.createElementNS(ns, "polyline");
      line.setAttribute("points", d);
      line.setAttribute("fill", "none");
      line.setAttribute("stroke", colors[i % colors.length]);
      line.setAttribute("stroke-width", "2");
      line.setAttribute("data-series", n);
      line.setAttribute("data-last", pts.length ? String(pts[pts.length - 1]) : "");
      line.setAttribute("data-sum", String(pts.reduce((a, v) => a + v, 0)));
      svg.append(line);
    });
    const legend = el("div", { class: "legend" }, names.map((n, i) =>
      el("span", {}, el("span", { class: "swatch", style: `background:${colors[i % colors.length]}` }),
         `${n}: ${fmtNum(series[n][series[n].length - 1], 1)}`)));
    box.replaceChildren(svg, legend);
  }
  return {
    node: box,
    // replace every series (a history read from the server): {name: [values...]}
    set(values) {
      for (const n of Object.keys(series)) delete series[n];
      for (const [n, vs] of Object.entries(values)) series[n] = vs.map(v => Number(v) || 0).slice(-keep);
      draw();
    },
    push(values) {
      for (const [n, v] of Object.entries(values)) {
        const s = series[n] || (series[n] = []);
        s.push(Number(v) || 0);
        if (s.length > keep) s.shift();
      }
      draw();
    },
  };
}

function poll(fn, ms) {
  fn();
  timers.push(setInterval(fn, ms));
}

// -------------------------------------------------------------------------------- pages
async function pageCluster() {
  const data = await api("/api/cluster");
  const chart = lineChart("cluster-tps", "messages per second (put / get)", 60);
  const detail = el("div", { id: "broker-detail" });
  const show = async (b, what) => {
    if (what === "status") {
      detail.replaceChildren(el("h3", {}, `${b.brokerName} runtime`), kvTable("broker-status", b.stats));
    } else {
      const cfg = await api(`/api/broker/config?addr=${encodeURIComponent(b.addr)}`);
      detail.replaceChildren(el("h3", {}, `${b.brokerName} config`), kvTable("broker-config", cfg));
    }
  };
  view.replaceChildren(
    el("h2", {}, "Cluster"),
    table("brokers", [
      ["cluster", b => b.cluster], ["broker", b => b.brokerName], ["BID", b => b.brokerId, "num"],
      ["role", b => b.role], ["address", b => b.addr], ["version", b => b.version],
      ["produce TPS", b => fmtNum(b.inTps, 2), "num"], ["consume TPS", b => fmtNum(b.outTps, 2), "num"],
      ["yesterday in/out", b => `${b.inTotalYest} / ${b.outTotalYest}`, "num"],
      ["today in/out", b => `${b.inTotalToday} / ${b.outTotalToday}`, "num"],
      ["disk", b => fmtNum(b.commitLogDiskRatio * 100, 1) + " %", "num"],
      ["", b => el("span", {}, el("button", { onclick: () => show(b, "status") }, "Status"),
                   el("button", { onclick: () => show(b, "config") }, "Config"))],
    ], data.brokers),
    chart.node, detail);
  poll(async () => {
    const d = await api("/api/cluster");
    chart.push({
      put: d.brokers.reduce((a, b) => a + b.inTps, 0),
      get: d.brokers.reduce((a, b) => a + b.outTps, 0),
    });
  }, 2000);
}

async function pageTopics() {
  const data = await api("/api/topics");
  const cluster = (await api("/api/cluster")).brokers.map(b => b.cluster)[0] || "DefaultCluster";
  const kinds = { NORMAL: true, RETRY: false, DLQ: false, SYSTEM: false };
  const filter = el("input", { id: "topic-filter", placeholder: "filter", oninput: () => render() });
  const list = el("div", {});
  const render = () => {
    const q = filter.value.toLowerCase();
    const rows = data.topics.filter(t => kinds[t.kind] && t.topic.toLowerCase().includes(q));
    list.replaceChildren(table("topics", [
      ["topic", t => el("a", { href: `#/topic/${encodeURIComponent(t.topic)}` }, t.topic)],
      ["type", t => t.kind],
    ], rows));
  };
  const boxes = Object.keys(kinds).map(k => el("label", {},
    el("input", { type: "checkbox", id: `kind-${k}`, checked: kinds[k],
                  onchange: e => { kinds[k] = e.target.checked; render(); } }), ` ${k} `));
  const form = el("form", { class: "inline panel", id: "topic-form" },
    el("label", {}, "cluster ", el("input", { name: "cluster", value: cluster, size: 14 })),
    el("label", {}, "topic ", el("input", { name: "topic", id: "new-topic", required: true })),
    el("label", {}, "read queues ", el("input", { name: "readQueueNums", type: "number", value: 8, min: 1, size: 4 })),
    el("label", {}, "write queues ", el("input", { name: "writeQueueNums", type: "number", value: 8, min: 1, size: 4 })),
    el("label", {}, "perm ", el("select", { name: "perm" },
      el("option", { value: 6 }, "RW (6)"), el("option", { value: 4 }, "R (4)"), el("option", { value: 2 }, "W (2)"))),
    el("button", { class: "primary", type: "submit", id: "topic-submit" }, "Add / update"));
  form.addEventListener("submit", async e => {
    e.preventDefault();
    const f = new FormData(form);
    const body = Object.fromEntries(f.entries());
    if (!confirm(`Create or update topic ${body.topic} on cluster ${body.cluster}?`)) return;
    const r = await api("/api/topics", { method: "POST", json: body });
    say(`topic ${r.topic} written on ${r.brokers.join(", ")}`, "ok");
    data.topics = (await api("/api/topics")).topics;
    render();
  });
  view.replaceChildren(el("h2", {}, "Topics"), form, el("div", {}, filter, " ", boxes), list);
  render();
}

async function pageTopic(topic) {
  const d = await api(`/api/topics/${encodeURIComponent(topic)}`);
  const sendForm = el("form", { class: "inline panel", id: "send-form" },
    el("label", {}, "tags ", el("input", { name: "tags", size: 10 })),
    el("label", {}, "keys ", el("input", { name: "keys", id: "send-keys", size: 14 })),
    el("label", {}, "body ", el("input", { name: "body", id: "send-body", size: 30 })),
    el("button", { class: "primary", type: "submit", id: "send-submit" }, "Send test message"));
  const result = el("div", { id: "send-result" });
  sendForm.addEventListener("submit", async e => {
    e.preventDefault();
    const r = await api(`/api/topics/${encodeURIComponent(topic)}/send`, { method: "POST", json: Object.fromEntries(new FormData(sendForm)) });
    result.replaceChildren(kvTable("send-result-table", r));
    say(`sent: ${r.sendStatus} ${r.msgId}`, "ok");
    const fresh = await api(`/api/topics/${encodeURIComponent(topic)}`);
    document.getElementById("topic-status").replaceWith(statusTable(fresh.status.queues));
  });
  const reset = resetForm(d.groups.map(g => g.group), [topic]);
  const del = el("button", { class: "danger", id: "delete-topic", onclick: async () => {
    const cluster = prompt(`Delete topic ${topic} from every broker and name server of cluster:`, "DefaultCluster");
    if (!cluster || !confirm(`Really delete topic ${topic}?`)) return;
    await api(`/api/topics/${encodeURIComponent(topic)}?cluster=${encodeURIComponent(cluster)}`, { method: "DELETE" });
    say(`topic ${topic} deleted`, "ok");
    location.hash = "#/topics";
  } }, "Delete topic");
  view.replaceChildren(
    el("h2", {}, `Topic ${topic}`),
    el("h3", {}, "Status"),
    statusTable(d.status.queues),
    el("h3", {}, "Route"),
    table("topic-route", [["broker", b => b.brokerName], ["addresses", b => JSON.stringify(b.brokerAddrs)]], d.route.brokerDatas || []),
    table("topic-queues", [["broker", q => q.brokerName], ["read", q => q.readQueueNums, "num"],
      ["write", q => q.writeQueueNums, "num"], ["perm", q => q.perm, "num"]], d.route.queueDatas || []),
    el("h3", {}, "Consumer groups"),
    table("topic-groups", [["group", g => el("a", { href: `#/group/${encodeURIComponent(g.group)}` }, g.group)],
      ["lag", g => fmtNum(g.diffTotal), "num"], ["TPS", g => fmtNum(g.consumeTps, 2), "num"]], d.groups),
    el("h3", {}, "Send a test message"), sendForm, result,
    el("h3", {}, "Reset consumer offset"), reset,
    el("h3", {}, "Delete"), del);
}

function statusTable(queues) {
  return table("topic-status", [["broker", q => q.brokerName], ["queue", q => q.queueId, "num"],
    ["min offset", q => q.minOffset, "num"], ["max offset", q => q.maxOffset, "num"],
    ["last update", q => fmtTime(q.lastUpdateTimestamp)]], queues);
}

function resetForm(groups, topics) {
  const form = el("form", { class: "inline panel", id: "reset-form" },
    el("label", {}, "group ", el("input", { name: "group", id: "reset-group", list: "reset-groups", value: groups[0] || "" })),
    el("datalist", { id: "reset-groups" }, groups.map(g => el("option", { value: g }))),
    el("label", {}, "topic ", el("input", { name: "topic", id: "reset-topic", value: topics[0] || "" })),
    el("label", {}, "to time ", el("input", { name: "time", id: "reset-time", type: "datetime-local" })),
    el("span", { class: "muted" }, " (empty: the oldest message) "),
    el("button", { class: "primary", type: "submit", id: "reset-submit" }, "Reset offset"));
  form.addEventListener("submit", async e => {
    e.preventDefault();
    const f = Object.fromEntries(new FormData(form));
    const ts = f.time ? new Date(f.time).getTime() : 0;
    if (!confirm(`Reset the offsets of group ${f.group} on ${f.topic} to ${f.time || "the oldest message"}?`)) return;
    const r = await api(`/api/groups/${encodeURIComponent(f.group)}/reset`, { method: "POST", json: { topic: f.topic, timestamp: ts } });
    say(`offsets reset: ${r.queues.map(q => `${q.brokerName}/${q.queueId}→${q.offset}`).join(", ")}`, "ok");
  });
  return form;
}

async function pageGroups() {
  let rows = (await api("/api/groups")).groups;
  let sortBy = 0, asc = true;
  const cols = [
    ["group", g => el("a", { href: `#/group/${encodeURIComponent(g.group)}` }, g.group)],
    ["clients", g => g.count, "num"], ["version", g => g.version], ["type", g => g.consumeType],
    ["model", g => g.messageModel], ["TPS", g => fmtNum(g.consumeTps, 2), "num"], ["lag", g => g.diffTotal, "num"],
  ];
  const keys = ["group", "count", "version", "consumeType", "messageModel", "consumeTps", "diffTotal"];
  const list = el("div", {});
  const render = () => {
    const k = keys[sortBy];
    const sorted = rows.slice().sort((a, b) => (a[k] > b[k] ? 1 : a[k] < b[k] ? -1 : 0) * (asc ? 1 : -1));
    list.replaceChildren(table("groups", cols, sorted, i => { asc = i === sortBy ? !asc : true; sortBy = i; render(); }));
  };
  const form = el("form", { class: "inline panel", id: "group-form" },
    el("label", {}, "cluster ", el("input", { name: "cluster", value: "DefaultCluster", size: 14 })),
    el("label", {}, "group ", el("input", { name: "group", required: true })),
    el("label", {}, "retry queues ", el("input", { name: "retryQueueNums", type: "number", value: 1, min: 0, size: 3 })),
    el("label", {}, "retry max times ", el("input", { name: "retryMaxTimes", type: "number", value: 16, size: 4 })),
    el("label", {}, el("input", { type: "checkbox", name: "consumeEnable", checked: true }), " consume enabled"),
    el("label", {}, el("input", { type: "checkbox", name: "consumeBroadcastEnable", checked: true }), " broadcast allowed"),
    el("button", { class: "primary", type: "submit" }, "Add / update"));
  form.addEventListener("submit", async e => {
    e.preventDefault();
    const body = Object.fromEntries(new FormData(form));
    body.consumeEnable = form.elements.consumeEnable.checked;
    body.consumeBroadcastEnable = form.elements.consumeBroadcastEnable.checked;
    if (!confirm(`Create or update consumer group ${body.group}?`)) return;
    await api("/api/groups", { method: "POST", json: body });
    say(`group ${body.group} written`, "ok");
  });
  view.replaceChildren(el("h2", {}, "Consumer groups"), form,
    el("button", { id: "groups-refresh", onclick: async () => { rows = (await api("/api/groups")).groups; render(); } }, "Refresh"),
    list);
  render();
}

async function pageGroup(group) {
  const chart = lineChart("group-lag", `lag of ${group} (messages)`, 90);
  const clients = el("div", { id: "group-clients" });
  const queues = el("div", { id: "group-queues" });
  const lagNow = el("span", { id: "group-lag-now" }, "-");
  const refresh = async () => {
    const d = await api(`/api/groups/${encodeURIComponent(group)}`);
    const c = d.connection;
    clients.replaceChildren(
      c ? table("clients", [["client id", x => x.clientId], ["address", x => x.clientAddr],
        ["language", x => x.language], ["version", x => x.versionDesc]], c.connections)
        : el("p", { class: "muted" }, d.error || "no client online"),
      c ? table("subscriptions", [["topic", s => s.topic], ["expression", s => s.subExpression]], c.subscriptions) : "");
    const p = d.progress;
    if (p) {
      queues.replaceChildren(table("queues", [["topic", q => q.topic], ["broker", q => q.brokerName],
        ["queue", q => q.queueId, "num"], ["broker offset", q => q.brokerOffset, "num"],
        ["consumer offset", q => q.consumerOffset, "num"], ["lag", q => q.diff, "num"],
        ["client", q => q.clientIp || "N/A"], ["last consumed", q => fmtTime(q.lastTimestamp)]], p.queues));
      lagNow.textContent = String(p.diffTotal);
      chart.push({ lag: p.diffTotal, tps: p.consumeTps });
    }
  };
  const del = el("button", { class: "danger", id: "delete-group", onclick: async () => {
    if (!confirm(`Delete consumer group ${group} (and its retry and DLQ topics) from cluster DefaultCluster?`)) return;
    await api(`/api/groups/${encodeURIComponent(group)}?cluster=DefaultCluster`, { method: "DELETE" });
    say(`group ${group} deleted`, "ok");
    location.hash = "#/groups";
  } }, "Delete group");
  view.replaceChildren(el("h2", {}, `Consumer group ${group}`), el("p", {}, "lag now: ", lagNow),
    chart.node, el("h3", {}, "Online clients"), clients, el("h3", {}, "Queues"), queues,
    el("h3", {}, "Reset offset"), resetForm([group], []), del);
  poll(refresh, 1000);
}

async function pageProducers() {
  const out = el("div", { id: "producers-result" });
  const form = el("form", { class: "inline panel", id: "producer-form" },
    el("label", {}, "topic ", el("input", { name: "topic", required: true })),
    el("label", {}, "producer group ", el("input", { name: "group", required: true })),
    el("button", { class: "primary", type: "submit" }, "Search"));
  form.addEventListener("submit", async e => {
    e.preventDefault();
    const q = new URLSearchParams(new FormData(form));
    const d = await api(`/api/producers?${q}`);
    out.replaceChildren(table("producers", [["client id", c => c.clientId], ["address", c => c.clientAddr],
      ["language", c => c.language], ["version", c => c.versionDesc]], d.connections));
  });
  view.replaceChildren(el("h2", {}, "Producers"), form, out);
}

function messageRows(msgs) {
  return table("messages", [
    ["message id", m => el("a", { href: `#/message?topic=${encodeURIComponent(m.topic)}&id=${encodeURIComponent(m.msgId)}` }, m.msgId)],
    ["tags", m => m.tags || ""], ["keys", m => m.keys || ""], ["queue", m => m.queueId, "num"],
    ["offset", m => m.queueOffset, "num"], ["stored", m => fmtTime(m.storeTimestamp)], ["size", m => m.bodySize, "num"],
  ], msgs);
}

async function pageMessages() {
  const out = el("div", { id: "messages-result" });
  const mk = (id, fields, build) => {
    const form = el("form", { class: "inline panel", id }, fields,
      el("button", { class: "primary", type: "submit" }, "Search"));
    form.addEventListener("submit", async e => {
      e.preventDefault();
      const d = await api(`/api/messages?${build(Object.fromEntries(new FormData(form)))}`);
      out.replaceChildren(el("p", {}, `${d.messages.length} message(s)`), messageRows(d.messages));
    });
    return form;
  };
  const topicIn = n => el("label", {}, "topic ", el("input", { name: "topic", id: `${n}-topic`, required: true }));
  const byKey = mk("by-key", [topicIn("key"), el("label", {}, "key ", el("input", { name: "key", id: "key-key", required: true }))],
    f => new URLSearchParams(f));
  const byId = mk("by-id", [topicIn("id"), el("label", {}, "message id ", el("input", { name: "id", id: "id-id", required: true, size: 36 }))],
    f => new URLSearchParams(f));
  const byTime = mk("by-time", [topicIn("time"),
    el("label", {}, "from ", el("input", { name: "begin", type: "datetime-local", required: true })),
    el("label", {}, "to ", el("input", { name: "end", type: "datetime-local" }))],
    f => new URLSearchParams({ topic: f.topic, begin: new Date(f.begin).getTime(),
                               end: f.end ? new Date(f.end).getTime() : Date.now() }));
  view.replaceChildren(el("h2", {}, "Messages"), el("h3", {}, "By key"), byKey, el("h3", {}, "By message id"), byId,
    el("h3", {}, "By time range"), byTime, out);
}

async function pageMessage(params) {
  const topic = params.get("topic"), id = params.get("id");
  const d = await api(`/api/message?topic=${encodeURIComponent(topic)}&id=${encodeURIComponent(id)}`);
  const m = d.message;
  const groups = d.tracks.map(t => t.consumerGroup);
  const resend = el("form", { class: "inline panel", id: "resend-form" },
    el("label", {}, "group ", el("input", { name: "group", value: groups[0] || "", list: "resend-groups" })),
    el("datalist", { id: "resend-groups" }, groups.map(g => el("option", { value: g }))),
    el("label", {}, "client id ", el("input", { name: "clientId", size: 30 })),
    el("button", { class: "primary", type: "submit" }, "Resend to client"));
  resend.addEventListener("submit", async e => {
    e.preventDefault();
    const f = Object.fromEntries(new FormData(resend));
    if (!confirm(`Push message ${id} to client ${f.clientId} of ${f.group}?`)) return;
    const r = await api("/api/message/resend", { method: "POST", json: { topic, id, group: f.group, clientId: f.clientId } });
    say(`consume result: ${JSON.stringify(r)}`, "ok");
  });
  const { properties, body, ...fields } = m;
  view.replaceChildren(el("h2", {}, `Message ${m.msgId}`), kvTable("message-fields", fields),
    el("h3", {}, "Properties"), kvTable("message-properties", properties),
    el("h3", {}, `Body (${m.bodyEncoding})`), el("pre", { id: "message-body" }, body || ""),
    el("h3", {}, "Consumption"),
    table("tracks", [["group", t => t.consumerGroup], ["state", t => el("span", { class: `tag ${t.trackType}` }, t.trackType)],
      ["detail", t => t.exceptionDesc || ""]], d.tracks),
    el("p", {}, el("a", { href: `#/trace?id=${encodeURIComponent(m.msgId)}` }, "message trace")),
    el("h3", {}, "Resend"), resend);
}

async function pageTrace(params) {
  const out = el("div", { id: "trace-result" });
  const form = el("form", { class: "inline panel", id: "trace-form" },
    el("label", {}, "message id ", el("input", { name: "id", id: "trace-id", value: params.get("id") || "", size: 36, required: true })),
    el("label", {}, "trace topic ", el("input", { name: "traceTopic", value: "RMQ_SYS_TRACE_TOPIC" })),
    el("button", { class: "primary", type: "submit" }, "Search"));
  const run = async () => {
    const q = new URLSearchParams(new FormData(form));
    const d = await api(`/api/trace?${q}`);
    if (!d.hops.length) { out.replaceChildren(el("p", { class: "muted" }, "no trace records for this message")); return; }
    out.replaceChildren(table("trace-hops", [
      ["hop", h => h.type], ["group", h => h.groupName], ["client", h => h.clientHost],
      ["time", h => fmtTime(h.timestamp)], ["cost ms", h => h.costTime, "num"],
      ["status", h => el("span", { class: `tag ${h.status}` }, h.status)], ["retries", h => h.retryTimes, "num"],
      ["broker / queue", h => h.storeHost || ""],
    ], d.hops), traceTimeline(d.hops));
  };
  form.addEventListener("submit", async e => { e.preventDefault(); await run(); });
  view.replaceChildren(el("h2", {}, "Message trace"), form, out);
  if (params.get("id")) await run();
}

function traceTimeline(hops) {
  // one bar per hop on a shared time axis (send, then each consumer's before/after)
  const t0 = Math.min(...hops.map(h => h.timestamp)), t1 = Math.max(...hops.map(h => h.timestamp + (h.costTime || 0)));
  const span = Math.max(1, t1 - t0), w = 640, rowH = 22;
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${w} ${hops.length * rowH + 10}`);
  svg.setAttribute("width", w);
  svg.setAttribute("id", "trace-timeline");
  hops.forEach((h, i) => {
    const x = 160 + ((h.timestamp - t0) / span) * (w - 200);
    const bar = document.createElementNS(ns, "rect");
    bar.setAttribute("x", x); bar.setAttribute("y", i * rowH + 6);
    bar.setAttribute("width", Math.max(3, ((h.costTime || 0) / span) * (w - 200)));
    bar.setAttribute("height", 12);
    bar.setAttribute("fill", h.status === "FAILED" ? "#c53030" : "#2b6cb0");
    const label = document.createElementNS(ns, "text");
    label.setAttribute("x", 4); label.setAttribute("y", i * rowH + 16);
    label.textContent = `${h.type} ${h.groupName}`;
    svg.append(bar, label);
  });
  return el("div", { class: "chart" }, svg);
}

// ------------------------------------------------------------------------------- router
const PAGES = { cluster: pageCluster, topics: pageTopics, groups: pageGroups, producers: pageProducers,
                messages: pageMessages, trace: pageTrace, dashboard: pageDashboard, dlq: pageDlq, acl: pageAcl };

async function route() {
  timers.forEach(clearInterval);
  timers = [];
  say("");
  const hash = location.hash.replace(/^#\/?/, "") || "cluster";
  const [path, query] = hash.split("?");
  const params = new URLSearchParams(query || "");
  const [page, arg] = path.split(/\/(.*)/s);
  document.querySelectorAll("#nav a").forEach(a => a.classList.toggle("active", a.dataset.page === page
    || (page === "topic" && a.dataset.page === "topics") || (page === "group" && a.dataset.page === "groups")
    || (page === "message" && a.dataset.page === "messages")));
  view.replaceChildren(el("p", { class: "muted" }, "loading..."));
  try {
    if (page === "topic") await pageTopic(decodeURIComponent(arg));
    else if (page === "group") await pageGroup(decodeURIComponent(arg));
    else if (page === "message") await pageMessage(params);
    else await (PAGES[page] || pageCluster)(params);
    view.setAttribute("data-page", page);
  } catch (err) {
    view.replaceChildren(el("p", { class: "muted" }, "could not load this page"));
    say(String(err.message || err), "error");
  }
}

window.addEventListener("hashchange", route);
window.addEventListener("unhandledrejection", e => { say(String(e.reason && e.reason.message || e.reason), "error"); e.preventDefault(); });
api("/api/config").then(c => { document.getElementById("namesrv").textContent = `name server ${c.namesrvAddr}`; }).catch(() => {});
route();
