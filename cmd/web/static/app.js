// The sessionstore web view. Everything a record holds is put into the page
// as text (textContent, text nodes, attribute values): never as markup.
"use strict";

(function () {
  const $ = (sel) => document.querySelector(sel);
  const SVGNS = "http://www.w3.org/2000/svg";

  // el builds an HTML element: attrs are set as attributes (or, for
  // "text", as the text content), children are nodes or strings (text).
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    setAttrs(e, attrs);
    for (const c of children) {
      if (c === null || c === undefined || c === false) continue;
      e.append(typeof c === "string" ? document.createTextNode(c) : c);
    }
    return e;
  }
  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVGNS, tag);
    setAttrs(e, attrs);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function setAttrs(e, attrs) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "text") e.textContent = String(v);
      else e.setAttribute(k, String(v));
    }
  }

  async function getJSON(url) {
    const resp = await fetch(url, { headers: { Accept: "application/json" } });
    let body;
    try {
      body = await resp.json();
    } catch (e) {
      throw new Error(url + ": " + resp.status + " " + resp.statusText);
    }
    if (!resp.ok) throw new Error(body && body.error ? body.error : url + ": " + resp.status);
    return body;
  }

  function showError(err) {
    const p = $("#error");
    p.textContent = String(err && err.message ? err.message : err);
    p.hidden = false;
  }
  function clearError() {
    $("#error").hidden = true;
  }
  function setStatus(text, live) {
    const s = $("#status");
    s.textContent = text;
    s.classList.toggle("live", !!live);
  }

  const shortID = (id) => (id ? id.slice(24, 32) : "-");
  const stamp = (t) => (t && !t.startsWith("0001-") ? t.slice(0, 19).replace("T", " ") + "Z" : "-");
  function bytes(n) {
    if (n < 0) return "?";
    if (n < 1024) return n + " B";
    const units = ["KiB", "MiB", "GiB", "TiB"];
    let v = n / 1024, i = 0;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return v.toFixed(v < 10 ? 1 : 0) + " " + units[i];
  }
  // cut is s on one line, at most n characters (code points), the last
  // an ellipsis when something was cut.
  function cut(s, n) {
    const cps = [...String(s).replace(/\s+/g, " ").trim()];
    return cps.length > n ? cps.slice(0, n - 1).join("") + "…" : cps.join("");
  }

  // ---- routing -------------------------------------------------------

  let view = null; // the session view's state, while it is shown

  function route() {
    clearError();
    const m = location.hash.match(/^#\/s\/([0-9a-f-]{36})(?:\/e\/([0-9a-f-]{36}))?$/);
    if (m) {
      stopListLive();
      showSession(m[1], m[2] || null);
      return;
    }
    stopLive();
    view = null;
    showList();
  }
  window.addEventListener("hashchange", route);
  window.addEventListener("DOMContentLoaded", () => {
    $("#context-only").addEventListener("change", () => view && loadPath());
    $("#to-head").addEventListener("click", () => view && (location.hash = "#/s/" + view.id));
    route();
  });

  // ---- the session list ------------------------------------------------

  let listES = null; // the live list's stream, while the first page is shown

  function stopListLive() {
    if (listES) {
      listES.close();
      listES = null;
    }
  }

  async function showList(cursor) {
    $("#session-view").hidden = true;
    $("#list-view").hidden = false;
    $("#crumb").textContent = "";
    setStatus("");
    if (cursor) stopListLive(); // a live first page would drop the pages below it
    let page;
    try {
      page = await getJSON("/api/sessions" + (cursor ? "?cursor=" + encodeURIComponent(cursor) : ""));
    } catch (e) {
      showError(e);
      return;
    }
    if (view) return; // a session was opened meanwhile
    renderList(page, !cursor);
    if (!cursor && !listES && window.EventSource) {
      const es = new EventSource("/api/live");
      listES = es;
      es.onopen = () => setStatus("live", true);
      es.addEventListener("sessions", (msg) => {
        if (listES === es && !view) renderList(JSON.parse(msg.data), true);
      });
      es.addEventListener("failure", (msg) => showError(JSON.parse(msg.data).error));
      es.onerror = () => {
        es.close();
        if (listES !== es) return;
        listES = null;
        setStatus("reconnecting…");
        setTimeout(() => { if (!view && !listES) showList(); }, 2000);
      };
    }
  }

  function renderList(page, first) {
    const tbody = $("#sessions tbody");
    if (first) tbody.replaceChildren();
    for (const s of page.sessions) {
      const href = "#/s/" + s.id;
      const tr = el("tr", { class: "session", "data-id": s.id },
        el("td", {}, el("a", { href: href, class: "name" }, s.name || shortID(s.id))),
        el("td", { class: "wrap" }, s.working_dir || "-"),
        el("td", {}, s.model || "-"),
        el("td", { class: "num events", title: s.tree_error || null }, s.events < 0 ? "?" : String(s.events)),
        el("td", { class: "num" }, bytes(s.bytes)),
        el("td", {}, stamp(s.created_at)),
        el("td", {}, stamp(s.updated_at)));
      tr.addEventListener("click", (ev) => {
        if (ev.target.tagName !== "A") location.hash = href;
      });
      tbody.append(tr);
    }
    $("#list-empty").hidden = tbody.children.length > 0;
    const more = $("#more");
    more.hidden = !page.next;
    more.onclick = () => showList(page.next);
  }

  // ---- a session ---------------------------------------------------------

  async function showSession(id, leaf) {
    $("#list-view").hidden = true;
    $("#session-view").hidden = false;
    if (view && view.id === id) {
      view.selected = leaf;
      drawGraph();
      loadPath();
      return;
    }
    stopLive();
    view = { id: id, selected: leaf, nodes: [], byId: new Map(), head: null, next: null, lanes: [], es: null, seen: new Set(), changes: new Map() };
    $("#graph").replaceChildren();
    $("#transcript").replaceChildren();
    let d;
    try {
      d = await getJSON("/api/sessions/" + id);
    } catch (e) {
      showError(e);
      return;
    }
    if (!view || view.id !== id) return;
    const s = d.session;
    $("#crumb").textContent = "/ " + (s.name || shortID(s.id));
    $("#meta").replaceChildren(
      el("b", {}, s.name || "(no name)"),
      el("span", {}, "id " + s.id),
      el("span", {}, "dir " + (s.working_dir || "-")),
      el("span", {}, "model " + (s.model || "-")),
      el("span", {}, "created " + stamp(s.created_at)),
      el("span", {}, "updated " + stamp(s.updated_at)));
    setTree(d);
    if (d.error) showError(d.error);
    drawGraph();
    loadPath();
    startLive();
  }

  function setTree(t) {
    if (t.from === 0) {
      view.nodes = [];
      view.byId = new Map();
    }
    for (const n of t.nodes) {
      view.byId.set(n.id, n);
      view.nodes.push(n);
    }
    view.head = t.head;
    view.next = t.next || t.head;
    view.lanes = t.lanes || [];
  }

  function startLive() {
    if (!view || !window.EventSource) return;
    const v = view;
    // last lets the server tell a continuation of the nodes the page
    // holds from another tree under the same id.
    const last = v.nodes.length ? "&last=" + v.nodes[v.nodes.length - 1].id : "";
    const es = new EventSource("/api/sessions/" + v.id + "/live?known=" + v.nodes.length + last);
    v.es = es;
    es.onopen = () => setStatus("live", true);
    es.addEventListener("tree", (msg) => {
      if (view !== v) return;
      const t = JSON.parse(msg.data);
      if (t.from !== 0 && t.from !== v.nodes.length) {
        // Not a continuation of what the page holds: start over.
        es.close();
        const id = v.id, sel = v.selected;
        view = null;
        showSession(id, sel);
        return;
      }
      if (t.from === v.nodes.length && t.nodes.length === 0 && t.head === v.head && (t.next || t.head) === v.next &&
          JSON.stringify(t.lanes || []) === JSON.stringify(v.lanes)) {
        return; // nothing the page lacks (the stream's first look): no redraw
      }
      setTree(t);
      drawGraph();
      if (!v.selected) loadPath();
    });
    es.addEventListener("gone", () => {
      es.close();
      setStatus("session deleted");
    });
    es.addEventListener("failure", (msg) => showError(JSON.parse(msg.data).error));
    es.onerror = () => {
      // Reconnect with the current count, not the one in the first URL.
      es.close();
      if (view !== v) return;
      setStatus("reconnecting…");
      setTimeout(() => { if (view === v && v.es === es) startLive(); }, 2000);
    };
  }

  function stopLive() {
    if (view && view.es) {
      view.es.close();
      view.es = null;
    }
  }

  // ---- the tree ------------------------------------------------------------

  const ROW = 22, COL = 16, PAD = 12;

  // layout gives each node a row (its append order) and a column: a
  // node's first child continues its column, every other child starts a
  // new one.
  function layout(nodes) {
    const col = new Map(), taken = new Set();
    let next = 0;
    for (const n of nodes) {
      const p = n.parent_id;
      if (p && col.has(p) && !taken.has(p)) {
        col.set(n.id, col.get(p));
        taken.add(p);
      } else {
        if (p) taken.add(p);
        col.set(n.id, next++);
      }
    }
    return { col: col, cols: next };
  }

  function pathTo(leaf) {
    const on = new Set();
    let id = leaf;
    while (id && view.byId.has(id) && !on.has(id)) {
      on.add(id);
      id = view.byId.get(id).parent_id;
    }
    return on;
  }

  function nodeLabel(n) {
    if (n.snapshot) {
      const label = snapshotLabel(n.preview);
      return "workspace snapshot" + (label ? " · " + label : "");
    }
    if (n.preview) return n.preview;
    return n.role ? n.kind + " · " + n.role : n.kind;
  }

  // snapshotLabel is the label of a workspace snapshot's manifest, read
  // from the start of its record (a node's preview), or "" when it holds
  // none whole.
  function snapshotLabel(text) {
    const m = /"label":("(?:[^"\\]|\\.)*")/.exec(text || "");
    if (!m) return "";
    try {
      return String(JSON.parse(m[1]));
    } catch (e) {
      return "";
    }
  }

  // manifestLabel is the label of the snapshot event ev: its record's,
  // or, when the record is left out, what its node's preview holds.
  function manifestLabel(ev) {
    if (!ev.omitted && ev.record && typeof ev.record === "object" && typeof ev.record.label === "string") return ev.record.label;
    const n = view.byId.get(ev.id);
    return n ? snapshotLabel(n.preview) : "";
  }

  // isSnapshot reports whether the event ev carries a workspace snapshot,
  // as its node in the tree says.
  function isSnapshot(ev) {
    const n = view && view.byId.get(ev.id);
    return !!(n && n.snapshot);
  }

  function drawGraph() {
    const v = view;
    const nodes = v.nodes;
    $("#tree-count").textContent = "(" + nodes.length + " events, " + v.lanes.length + " lane" + (v.lanes.length === 1 ? "" : "s") + ")";
    const { col, cols } = layout(nodes);
    const row = new Map();
    nodes.forEach((n, i) => row.set(n.id, i));
    const on = pathTo(v.selected || v.next);
    const tips = new Map();
    for (const l of v.lanes) {
      if (!l.tip) continue;
      if (!tips.has(l.tip)) tips.set(l.tip, []);
      tips.get(l.tip).push(l);
    }
    const labelX = PAD + cols * COL + 6;
    const width = Math.max(labelX + 520, 400);
    const height = PAD * 2 + Math.max(nodes.length, 1) * ROW;
    const root = svg("svg", { width: width, height: height, viewBox: "0 0 " + width + " " + height, id: "tree-svg", role: "img", "aria-label": "event tree" });
    const xOf = (id) => PAD + col.get(id) * COL;
    const yOf = (id) => PAD + row.get(id) * ROW + ROW / 2;
    const rows = svg("g", { class: "rows" });
    const edges = svg("g", { class: "edges" });
    const marks = svg("g", { class: "nodes" });
    const labels = svg("g", { class: "labels" });
    for (const n of nodes) {
      const x = xOf(n.id), y = yOf(n.id);
      const bg = svg("rect", { class: "row", x: 0, y: y - ROW / 2, width: width, height: ROW, fill: "transparent", "data-id": n.id });
      bg.addEventListener("click", () => select(n.id));
      rows.append(bg);
      if (n.parent_id && col.has(n.parent_id)) {
        const px = xOf(n.parent_id), py = yOf(n.parent_id);
        const d = px === x ? `M${px},${py} L${x},${y}` : `M${px},${py} Q${x},${py} ${x},${py + ROW * 0.8} L${x},${y}`;
        const cls = ["edge"];
        if (n.branch_from) cls.push("branch");
        if (on.has(n.id)) cls.push("on-path");
        edges.append(svg("path", { class: cls.join(" "), d: d }));
      }
      const cls = ["node", n.kind];
      if (n.kind === "message" && n.role) cls.push("message-" + n.role);
      if (n.snapshot) cls.push("snapshot");
      if (on.has(n.id)) cls.push("on-path");
      if (n.id === v.selected) cls.push("selected");
      if (n.id === v.head) cls.push("head");
      const attrs = { class: cls.join(" "), "data-id": n.id, "data-kind": n.kind, "data-role": n.role || "" };
      let shape;
      if (n.kind === "compaction") {
        shape = svg("polygon", Object.assign(attrs, { points: `${x},${y - 7} ${x + 7},${y} ${x},${y + 7} ${x - 7},${y}` }));
      } else if (n.kind === "branch_summary") {
        shape = svg("rect", Object.assign(attrs, { x: x - 6, y: y - 6, width: 12, height: 12 }));
      } else if (n.snapshot) {
        // A workspace snapshot: a sheet, wider than tall.
        shape = svg("rect", Object.assign(attrs, { x: x - 7, y: y - 5, width: 14, height: 10, rx: 2 }));
      } else {
        shape = svg("circle", Object.assign(attrs, { cx: x, cy: y, r: 6 }));
      }
      shape.append(svg("title", {}, (n.snapshot ? "workspace snapshot" : n.kind) + (n.role ? " · " + n.role : "") + "  " + n.id + "  " + stamp(n.timestamp) + "  " + bytes(n.size) + (n.preview ? "\n" + n.preview : "")));
      shape.addEventListener("click", () => select(n.id));
      marks.append(shape);
      if (n.id === v.head) marks.append(svg("circle", { class: "head-ring", cx: x, cy: y, r: 9.5 }));
      if (n.id === v.next && v.next !== v.head) marks.append(svg("circle", { class: "next-ring", cx: x, cy: y, r: 9.5 }));

      let lx = labelX;
      const tag = (text, kind) => {
        const w = [...text].length * 7 + 10;
        labels.append(svg("rect", { class: "tag-bg " + kind, x: lx, y: y - 7, width: w, height: 14, rx: 3 }));
        labels.append(svg("text", { class: "tag " + kind.split(" ")[0], x: lx + 4, y: y + 4 }, text));
        lx += w + 4;
      };
      if (n.id === v.head) tag("HEAD", "head");
      if (n.id === v.next && v.next !== v.head) tag("NEXT", "next");
      if (n.snapshot) tag("files", "files");
      for (const l of tips.get(n.id) || []) tag("⎇ " + l.name, "lane" + (l.active ? " active" : ""));
      const label = svg("text", { class: "label" + (on.has(n.id) ? "" : " off-path"), x: lx, y: y + 4, "data-id": n.id }, cut(nodeLabel(n), 90));
      label.addEventListener("click", () => select(n.id));
      labels.append(label);
    }
    root.append(rows, edges, marks, labels);
    const box = $("#graph");
    const scroll = box.scrollTop;
    box.replaceChildren(root);
    box.scrollTop = scroll;
  }

  function select(id) {
    location.hash = id === view.next ? "#/s/" + view.id : "#/s/" + view.id + "/e/" + id;
  }

  // ---- the path as a transcript ---------------------------------------------

  let pathSeq = 0;

  async function loadPath() {
    const v = view;
    const seq = ++pathSeq;
    const ctx = $("#context-only").checked;
    let url = "/api/sessions/" + v.id + "/path" + "?context=" + (ctx ? 1 : 0);
    if (v.selected) url += "&leaf=" + v.selected;
    $("#to-head").hidden = !v.selected;
    let p;
    try {
      p = await getJSON(url);
    } catch (e) {
      if (seq === pathSeq) showError(e);
      return;
    }
    if (seq !== pathSeq || view !== v) return;
    // The active path ends at HEAD, or at NEXT while a lane switch is pending.
    const end = p.leaf === v.head ? "HEAD " : "NEXT ";
    $("#path-title").textContent = (v.selected ? "to " + shortID(p.leaf) : "active, to " + end + shortID(p.leaf)) + " · " + p.events.length + " events";
    const list = $("#transcript");
    const open = new Set([...list.querySelectorAll("details[open]")].map((d) => d.closest(".ev").dataset.id + "/" + d.dataset.part));
    const fresh = v.seen.size > 0;
    list.replaceChildren();
    for (const ev of p.events) {
      const li = renderEvent(ev);
      if (fresh && !v.seen.has(ev.id)) li.classList.add("new");
      v.seen.add(ev.id);
      for (const d of li.querySelectorAll("details")) {
        if (open.has(ev.id + "/" + d.dataset.part)) d.open = true;
      }
      list.append(li);
    }
    if (p.error) list.append(el("li", { class: "ev" }, el("span", { class: "error" }, p.error)));
  }

  function decode(ev) {
    if (ev.omitted) return null;
    return ev.record === null || typeof ev.record !== "object" ? { _value: ev.record } : ev.record;
  }

  function renderEvent(ev) {
    const cls = ["ev", ev.kind];
    if (ev.role) cls.push(ev.role);
    const snap = isSnapshot(ev);
    if (snap) cls.push("snapshot");
    const who = snap ? "workspace snapshot" : ev.kind === "message" ? ev.role || "message" : ev.kind.replace("_", " ");
    const li = el("li", { class: cls.join(" "), "data-id": ev.id, "data-kind": ev.kind },
      el("div", { class: "hdr" },
        el("span", { class: "who" }, who),
        el("span", {}, shortID(ev.id)),
        el("span", {}, stamp(ev.timestamp)),
        el("span", {}, bytes(ev.size)),
        ev.branch_from ? el("span", {}, "starts a branch from " + shortID(ev.branch_from)) : null,
        snap ? el("span", { class: "snapshot-label" }, manifestLabel(ev)) : null));
    const body = el("div", { class: "body" });
    li.append(body);
    if (snap) body.append(changesBlock(ev));
    if (ev.omitted) {
      const d = el("details", { class: "lazy", "data-part": "record" },
        el("summary", {}, summaryLine(ev, null) + " — " + bytes(ev.size) + (ev.digest ? " in a blob" : "") + ", loaded when opened"));
      let loaded = false;
      d.addEventListener("toggle", async () => {
        if (!d.open || loaded) return;
        loaded = true;
        const slot = el("div", { class: "omitted" }, "loading…");
        d.append(slot);
        try {
          const full = await getJSON("/api/sessions/" + view.id + "/events/" + ev.id);
          slot.replaceWith(renderBody(full, decode(full), true));
        } catch (e) {
          loaded = false;
          slot.replaceWith(el("div", { class: "error" }, String(e.message || e)));
        }
      });
      body.append(d);
      return li;
    }
    body.append(renderBody(ev, decode(ev), false));
    return li;
  }

  // summaryLine is the one line that stands for a collapsed record.
  function summaryLine(ev, r) {
    switch (ev.kind) {
      case "tool_call": return "tool call" + (r && r.name ? ": " + r.name : "") + (r && r.call_id ? " (" + r.call_id + ")" : "");
      case "tool_result": {
        let s = "tool result" + (r && r.call_id ? " (" + r.call_id + ")" : "");
        if (r && r.is_error) s += " · error";
        if (r && r.outcome) s += " · " + r.outcome;
        return s;
      }
      case "message": return (ev.role || "message") + " message";
      case "custom": return isSnapshot(ev) ? "manifest" : "custom record";
      default: return ev.kind.replace("_", " ");
    }
  }

  // put appends the children that are not null to parent (append itself
  // would add null as the text "null").
  function put(parent, ...kids) {
    for (const k of kids) if (k) parent.append(k);
  }

  function pretty(v) {
    if (v === undefined) return "";
    if (typeof v === "string") return v;
    return JSON.stringify(v, null, 2);
  }

  function summaryBlock(sum) {
    const box = el("div", { class: "summary" });
    if (!sum) return box;
    const fields = [["goals", "Goals"], ["constraints", "Constraints"], ["decisions", "Decisions"], ["files_changed", "Files changed"], ["unresolved", "Unresolved"], ["facts", "Facts"]];
    for (const [k, title] of fields) {
      if (!Array.isArray(sum[k]) || sum[k].length === 0) continue;
      box.append(el("div", {}, title + ":"), el("ul", {}, ...sum[k].map((x) => el("li", {}, String(x)))));
    }
    if (sum.text) box.append(el("p", { class: "text" }, String(sum.text)));
    return box;
  }

  // renderBody draws a record; inside is true when it goes inside the
  // <details> that loaded it (no second collapsing).
  function renderBody(ev, r, inside) {
    const frag = el("div", { class: "record" });
    const collapsed = (part, summary, content) => {
      if (inside) return el("div", {}, el("div", {}, summary), content);
      return el("details", { "data-part": part }, el("summary", {}, summary), content);
    };
    switch (ev.kind) {
      case "message": {
        put(frag, el("p", { class: "text" }, typeof r.content === "string" ? r.content : pretty(r.content)));
        if (r.reasoning) put(frag, collapsed("reasoning", "reasoning", el("pre", {}, String(r.reasoning))));
        if (Array.isArray(r.tool_calls) && r.tool_calls.length) {
          put(frag, el("div", { class: "calls" }, "announces: " + r.tool_calls.map((c) => c.name).join(", ")));
        }
        break;
      }
      case "tool_call":
        put(frag, collapsed("call", summaryLine(ev, r), el("pre", {}, pretty(r.arguments))));
        break;
      case "tool_result":
        put(frag, collapsed("result", summaryLine(ev, r), el("pre", {}, pretty(r.output))));
        break;
      case "compaction":
        put(frag, el("div", { class: "mark" }, "compaction — the model's context starts here"),
          r.tokens_before ? el("div", {}, "replaced about " + r.tokens_before + " tokens") : null,
          r.first_kept ? el("div", {}, "keeps verbatim from " + shortID(r.first_kept)) : null,
          summaryBlock(r.summary));
        break;
      case "branch_summary":
        put(frag, el("div", { class: "mark" }, "branch summary — of the abandoned branch at " + shortID(r.abandoned_head)),
          summaryBlock(r.summary));
        break;
      default:
        put(frag, collapsed("record", summaryLine(ev, r), el("pre", {}, pretty(r._value !== undefined ? r._value : r))));
    }
    return frag;
  }
  // ---- a workspace snapshot's changes ----------------------------------------

  // changesBlock shows the files a snapshot event changed: the Diff
  // between its parent's workspace and its own, fetched from the changes
  // endpoint when the block comes into view (a path may hold many
  // snapshots), once per event for the view (a snapshot never changes).
  function changesBlock(ev) {
    const box = el("div", { class: "changes", "data-id": ev.id }, el("div", { class: "omitted" }, "files changed: loading…"));
    const v = view;
    const load = () => {
      if (!v.changes.has(ev.id)) {
        v.changes.set(ev.id, getJSON("/api/sessions/" + v.id + "/events/" + ev.id + "/changes"));
      }
      v.changes.get(ev.id).then(
        (c) => box.replaceChildren(...renderChanges(c)),
        (e) => {
          v.changes.delete(ev.id); // asked again when drawn again
          box.replaceChildren(el("div", { class: "error" }, String(e.message || e)));
        });
    };
    if (window.IntersectionObserver) {
      const seen = new IntersectionObserver((entries) => {
        if (!entries.some((e) => e.isIntersecting)) return;
        seen.disconnect();
        load();
      });
      seen.observe(box);
    } else {
      load();
    }
    return box;
  }

  const opSign = { added: "+", modified: "~", deleted: "-" };

  function renderChanges(c) {
    if (!c.snapshot) return [el("div", { class: "omitted" }, "no workspace snapshot here")];
    const counts = { added: 0, modified: 0, deleted: 0 };
    for (const ch of c.changes) counts[ch.op] = (counts[ch.op] || 0) + 1;
    const parts = ["added", "modified", "deleted"].filter((op) => counts[op]).map((op) => counts[op] + " " + op);
    let head = c.total + " file" + (c.total === 1 ? "" : "s") + " changed" + (parts.length ? " (" + parts.join(", ") + ")" : "");
    head += " · " + c.files + " file" + (c.files === 1 ? "" : "s") + " in the workspace";
    const list = el("ul", { class: "change-list" });
    for (const ch of c.changes) {
      let size;
      if (ch.op === "added") size = bytes(ch.to.size);
      else if (ch.op === "deleted") size = bytes(ch.from.size);
      else {
        size = bytes(ch.from.size) + " → " + bytes(ch.to.size);
        if (ch.from.mode !== ch.to.mode) size += ", mode " + ch.from.mode.toString(8) + " → " + ch.to.mode.toString(8);
      }
      list.append(el("li", { class: "change " + ch.op, "data-op": ch.op, "data-path": ch.path, title: ch.op },
        el("span", { class: "op" }, opSign[ch.op] || "?"),
        el("span", { class: "path" }, ch.path),
        el("span", { class: "size" }, size)));
    }
    const out = [el("div", { class: "changes-head" }, head)];
    if (c.changes.length) out.push(list);
    if (c.total > c.changes.length) out.push(el("div", { class: "omitted" }, "and " + (c.total - c.changes.length) + " more (sessionstore diff lists them all)"));
    return out;
  }
})();
