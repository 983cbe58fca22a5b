// pocketmq console: the Dashboard, DLQ messages and ACL pages (routes in deploy/console/api_more.py).
// Loaded before console.js, whose helpers (el, api, table, lineChart, poll, say, view) these pages
// call once the router runs; console.js's PAGES table names them.
"use strict";

// A horizontal bar chart: rows = [{label, value}] (the dashboard's TOP 10).
function barChart(id, title, rows) {
  const ns = "http://www.w3.org/2000/svg", w = 640, rowH = 20, left = 200;
  const max = Math.max(1, ...rows.map(r => r.value));
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${w} ${rows.length * rowH + 24}`);
  svg.setAttribute("width", w);
  const head = document.createElementNS(ns, "text");
  head.setAttribute("x", 4); head.setAttribute("y", 14);
  head.textContent = title;
  svg.append(head);
  rows.forEach((r, i) => {
    const y = 22 + i * rowH;
    const label = document.createElementNS(ns, "text");
    label.setAttribute("x", 4); label.setAttribute("y", y + 12);
    label.textContent = r.label;
    const bar = document.createElementNS(ns, "rect");
    bar.setAttribute("x", left); bar.setAttribute("y", y + 2);
    bar.setAttribute("width", Math.max(1, (r.value / max) * (w - left - 60)));
    bar.setAttribute("height", rowH - 6);
    bar.setAttribute("fill", "#2b6cb0");
    bar.setAttribute("data-label", r.label);
    bar.setAttribute("data-value", String(r.value));
    const value = document.createElementNS(ns, "text");
    value.setAttribute("x", left + Math.max(1, (r.value / max) * (w - left - 60)) + 4); value.setAttribute("y", y + 12);
    value.textContent = String(r.value);
    svg.append(label, bar, value);
  });
  return el("div", { class: "chart", id }, svg);
}

// Dashboard: per-day totals per broker, topic TOP 10, and the console's per-sample history
// (GET /api/dashboard; the server samples every --collect-interval seconds).
async function pageDashboard() {
  const brokerChart = lineChart("dash-broker-tps", "broker put TPS (one point per sample)", 120);
  const topicChart = lineChart("dash-topic-volume", "messages put per sample (top 5 topics)", 120);
  const brokers = el("div", { id: "dash-brokers" }), topics = el("div", { id: "dash-topics" });
  const bars = el("div", { id: "dash-bars" }), every = el("span", { id: "dash-interval" }, "-");
  const refresh = async () => {
    const d = await api("/api/dashboard");
    every.textContent = `${d.history.interval} s`;
    brokers.replaceChildren(table("dash-broker-table", [
      ["broker", b => b.broker], ["address", b => b.addr],
      ["put today", b => b.putToday, "num"], ["get today", b => b.getToday, "num"],
      ["put yesterday", b => b.putYesterday, "num"], ["get yesterday", b => b.getYesterday, "num"],
    ], d.brokers));
    const sampled = name => (d.history.topics[name] || []).reduce((a, p) => a + p[1], 0);
    const top = d.topics.slice().sort((a, b) => (b.put24h - a.put24h) || (sampled(b.topic) - sampled(a.topic))
      || (b.stored - a.stored)).slice(0, 10);
    topics.replaceChildren(table("dash-topic-table", [
      ["topic", t => el("a", { href: `#/topic/${encodeURIComponent(t.topic)}` }, t.topic)],
      ["put in 24 h", t => t.put24h, "num"], ["put while watched", t => sampled(t.topic), "num"],
      ["stored", t => t.stored, "num"],
    ], top));
    bars.replaceChildren(barChart("dash-topic-bars", "topic TOP 10: messages put while watched",
      top.map(t => ({ label: t.topic, value: sampled(t.topic) }))));
    brokerChart.set(Object.fromEntries(Object.entries(d.history.brokers).map(([n, s]) => [n, s.map(p => p[1])])));
    const busiest = Object.keys(d.history.topics).sort((a, b) => sampled(b) - sampled(a)).slice(0, 5);
    topicChart.set(Object.fromEntries(busiest.map(n => [n, d.history.topics[n].map(p => p[1])])));
  };
  view.replaceChildren(el("h2", {}, "Dashboard"),
    el("h3", {}, "Brokers: messages per day"), brokers,
    el("h3", {}, "Topics"), topics, bars,
    el("h3", {}, "Trends"), el("p", { class: "muted" }, "sampled by the console every ", every,
      " since it started (pocketmq console --collect-interval)"), brokerChart.node, topicChart.node);
  poll(refresh, 3000);
}

// DLQ: a group's %DLQ% messages by time range or id; resend one to its original topic, or push it
// to an online client of the group (consume message directly), each after a confirmation.
async function pageDlq(params) {
  const out = el("div", { id: "dlq-result" });
  const form = el("form", { class: "inline panel", id: "dlq-form" },
    el("label", {}, "consumer group ", el("input", { name: "group", id: "dlq-group", value: params.get("group") || "", required: true })),
    el("label", {}, "from ", el("input", { name: "begin", type: "datetime-local" })),
    el("label", {}, "to ", el("input", { name: "end", type: "datetime-local" })),
    el("label", {}, "or message id ", el("input", { name: "id", id: "dlq-id", size: 34 })),
    el("button", { class: "primary", type: "submit", id: "dlq-search" }, "Search"));
  const run = async () => {
    const f = Object.fromEntries(new FormData(form));
    const q = new URLSearchParams({ group: f.group });
    if (f.id) q.set("id", f.id);
    else {
      if (f.begin) q.set("begin", new Date(f.begin).getTime());
      q.set("end", f.end ? new Date(f.end).getTime() : Date.now());
    }
    const d = await api(`/api/dlq?${q}`);
    let clients = [];
    try {
      const g = await api(`/api/groups/${encodeURIComponent(f.group)}`);
      clients = g.connection ? g.connection.connections.map(c => c.clientId) : [];
    } catch (err) { clients = []; }
    const pick = el("select", { id: "dlq-client" }, clients.map(c => el("option", { value: c }, c)));
    const grant = el("button", { id: "dlq-grant", onclick: async () => {
      if (!confirm(`Grant read permission on ${d.topic} (perm 6) so it can be searched by time?`)) return;
      await api("/api/dlq/readable", { method: "POST", json: { group: f.group } });
      say(`${d.topic} is readable`, "ok");
      await run();
    } }, "Make readable");
    const resend = async (m, toClient) => {
      const what = toClient ? `push message ${m.msgId} to client ${pick.value} of ${f.group}`
                            : `resend message ${m.msgId} to topic ${m.originTopic}`;
      if (!confirm(`Really ${what}?`)) return;
      const r = await api("/api/dlq/resend", { method: "POST",
        json: { group: f.group, id: m.offsetMsgId, clientId: toClient ? pick.value : "" } });
      say(toClient ? `consume result: ${JSON.stringify(r.result)}` : `resent to ${r.topic}: ${r.sendStatus} ${r.msgId}`, "ok");
    };
    out.replaceChildren(
      el("p", {}, `${d.messages.length} message(s) in ${d.topic}`, d.note ? ` (${d.note})` : ""),
      d.readable === false ? el("p", {}, "The broker creates dead-letter topics write-only; ", grant) : "",
      clients.length ? el("p", {}, "online client ", pick) : el("p", { class: "muted" }, "no client of this group is online: resend to the topic only"),
      table("dlq-messages", [
        ["message id", m => el("a", { href: `#/message?topic=${encodeURIComponent(m.topic)}&id=${encodeURIComponent(m.offsetMsgId)}` }, m.msgId)],
        ["original topic", m => m.originTopic], ["tags", m => m.tags || ""], ["keys", m => m.keys || ""],
        ["reconsumed", m => m.reconsumeTimes, "num"], ["stored", m => fmtTime(m.storeTimestamp)],
        ["", m => el("span", {},
          el("button", { class: "dlq-resend", disabled: !m.originTopic, onclick: () => resend(m, false) }, "Resend to topic"),
          el("button", { class: "dlq-push", disabled: !clients.length, onclick: () => resend(m, true) }, "Push to client"))],
      ], d.messages));
  };
  form.addEventListener("submit", async e => { e.preventDefault(); await run(); });
  view.replaceChildren(el("h2", {}, "Dead-letter messages"), form, out);
  if (params.get("group")) await run();
}

// ACL: the accounts and global white list of every broker (plain_acl.yml through codes 50-54);
// add / update / delete an account and set the white list, each after a confirmation.
async function pageAcl() {
  const out = el("div", { id: "acl-result" });
  const render = async () => {
    const d = await api("/api/acl");
    out.replaceChildren(...d.brokers.map(b => {
      if (b.error) return el("div", { class: "panel" }, el("h3", {}, `${b.broker} ${b.addr}`), el("p", { class: "muted acl-error" }, b.error));
      const accounts = b.config.plainAccessConfigs || [];
      return el("div", { class: "panel" },
        el("h3", {}, `${b.broker} ${b.addr}`),
        el("p", {}, "global white list: ", el("code", { class: "acl-white" }, (b.config.globalWhiteAddrs || []).join(", ") || "(none)"),
          " | version: ", Object.values(b.version.files || {}).map(v => v.counter).join(", ")),
        table("acl-accounts", [
          ["access key", a => a.accessKey], ["admin", a => String(!!a.admin)],
          ["white address", a => a.whiteRemoteAddress || ""], ["topic default", a => a.defaultTopicPerm || ""],
          ["group default", a => a.defaultGroupPerm || ""], ["topics", a => (a.topicPerms || []).join(", ")],
          ["groups", a => (a.groupPerms || []).join(", ")],
          ["", a => el("button", { class: "danger acl-delete", "data-key": a.accessKey, onclick: async () => {
            if (!confirm(`Delete ACL account ${a.accessKey} from every broker?`)) return;
            await api(`/api/acl/${encodeURIComponent(a.accessKey)}`, { method: "DELETE" });
            say(`account ${a.accessKey} deleted`, "ok");
            await render();
          } }, "Delete")],
        ], accounts));
    }));
  };
  const form = el("form", { class: "panel", id: "acl-form" },
    el("label", {}, "access key ", el("input", { name: "accessKey", id: "acl-ak", required: true })), " ",
    el("label", {}, "secret key ", el("input", { name: "secretKey", id: "acl-sk", type: "password" })), " ",
    el("label", {}, "white address ", el("input", { name: "whiteRemoteAddress", size: 14 })), " ",
    el("label", {}, el("input", { type: "checkbox", name: "admin" }), " admin"), el("br"),
    el("label", {}, "topic default ", el("select", { name: "defaultTopicPerm" },
      ["", "DENY", "PUB", "SUB", "PUB|SUB"].map(p => el("option", { value: p }, p || "(keep)")))), " ",
    el("label", {}, "group default ", el("select", { name: "defaultGroupPerm" },
      ["", "DENY", "SUB", "PUB|SUB"].map(p => el("option", { value: p }, p || "(keep)")))), el("br"),
    el("label", {}, "topic perms ", el("textarea", { name: "topicPerms", id: "acl-topics", rows: 2, placeholder: "topicA=PUB\ntopicB=SUB" })), " ",
    el("label", {}, "group perms ", el("textarea", { name: "groupPerms", rows: 2, placeholder: "groupA=SUB" })), " ",
    el("button", { class: "primary", type: "submit", id: "acl-submit" }, "Add / update"));
  form.addEventListener("submit", async e => {
    e.preventDefault();
    const body = Object.fromEntries(new FormData(form));
    body.admin = form.elements.admin.checked;
    for (const k of ["topicPerms", "groupPerms"]) if (!body[k].trim()) delete body[k];
    if (!confirm(`Create or update ACL account ${body.accessKey} on every broker?`)) return;
    const r = await api("/api/acl", { method: "POST", json: body });
    say(`account ${r.accessKey} written on ${r.brokers.join(", ")}`, "ok");
    await render();
  });
  const white = el("form", { class: "inline panel", id: "acl-white-form" },
    el("label", {}, "global white list ", el("input", { name: "addresses", id: "acl-white-input", size: 40, placeholder: "10.10.103.*,192.168.0.*" })),
    el("button", { class: "primary", type: "submit" }, "Set"));
  white.addEventListener("submit", async e => {
    e.preventDefault();
    const addresses = new FormData(white).get("addresses");
    if (!confirm(`Set the global white list of every broker to: ${addresses || "(empty)"}?`)) return;
    await api("/api/acl/white", { method: "POST", json: { addresses } });
    say("global white list written", "ok");
    await render();
  });
  view.replaceChildren(el("h2", {}, "ACL"),
    el("p", { class: "muted" }, "Accounts of the brokers' plain_acl.yml (aclEnable=true). The console signs its requests with --access-key / --secret-key: an admin account."),
    form, white, out);
  await render();
}
