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
  // tokens is n in a short form: 950, 12.3k, 4.5M.
  function tokens(n) {
    if (n < 1000) return String(n);
    if (n < 1e6) return (n / 1e3).toFixed(1) + "k";
    return (n / 1e6).toFixed(1) + "M";
  }
  // tokenPair is the input (cache included) and output tokens of t, "-"
  // for none recorded.
  const tokenPair = (t) => (t ? tokens(t.in) + "/" + tokens(t.out) : "-");

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
    $("#search").addEventListener("submit", (ev) => {
      ev.preventDefault();
      search($("#search-q").value);
    });
    $("#search-close").addEventListener("click", () => {
      $("#search-view").hidden = true;
    });
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
        el("td", {}, el("a", { href: href, class: s.name ? "name" : "name untitled", title: s.name ? null : "no name: its first prompt" }, s.name || s.title || shortID(s.id))),
        el("td", { class: "wrap" }, s.working_dir || "-"),
        el("td", {}, s.model || "-"),
        el("td", { class: "num events", title: s.tree_error || null }, s.events < 0 ? "?" : String(s.events)),
        el("td", { class: "num" }, bytes(s.bytes)),
        el("td", { class: "num tokens", title: s.tokens ? s.tokens.messages + " messages reported usage" : "no totals recorded" }, tokenPair(s.tokens)),
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

  // ---- search --------------------------------------------------------------
  //
  // The search box asks /api/search and lists the hits, best first; each
  // links to its event as a tree node does (#/s/<session>/e/<event>): the
  // session opens with the path to the event shown and its node selected.

  let searchSeq = 0;

  async function search(text) {
    const seq = ++searchSeq;
    const box = $("#search-view"), list = $("#hits");
    if (!text.trim()) {
      box.hidden = true;
      return;
    }
    let ans;
    try {
      ans = await getJSON("/api/search?q=" + encodeURIComponent(text));
    } catch (e) {
      if (seq !== searchSeq) return;
      list.replaceChildren(el("li", { class: "error" }, String(e.message || e)));
      $("#search-count").textContent = "";
      box.hidden = false;
      return;
    }
    if (seq !== searchSeq) return;
    list.replaceChildren();
    for (const h of ans.hits) {
      const href = "#/s/" + h.session + "/e/" + h.event;
      list.append(el("li", { class: "hit", "data-session": h.session, "data-event": h.event },
        el("span", { class: "hit-meta" }, (h.session_name || shortID(h.session)) + " · " + h.kind + (h.role ? " · " + h.role : "") + " · " + stamp(h.timestamp)),
        el("a", { href: href, class: "hit-link" }, h.snippet || "(no text)")));
    }
    $("#search-count").textContent = ans.hits.length + (ans.hits.length === 1 ? " hit" : " hits");
    if (!ans.hits.length) list.append(el("li", { class: "none" }, "no event matches"));
    box.hidden = false;
  }

  // ---- a session ---------------------------------------------------------
  //
  // A session of 100,000 events is neither fetched nor drawn whole. The
  // page fetches its layout (each node's parent's row: /layout), lays
  // every row out from it (a column each), and draws the rows on screen
  // only, fetching their nodes a page at a time (/nodes). The path is
  // fetched a page at a time too (/path?limit=), its newest page first.
  // A live update adds the new rows to the layout and the new events to
  // the path, and redraws the rows on screen: nothing is fetched again.

  const NODE_PAGE = 256; // rows a /nodes request asks for
  const PATH_PAGE = 100; // events a /path request asks for
  const OVERSCAN = 16; // rows drawn above and below the screen
  const USAGE_DELAY = 1000; // ms from a live update to the totals asked again

  // times holds what the page measured (performance.now(), ms): open is
  // the time from a session's opening to its tree and path drawn, live
  // the times from a live update's arrival to its events drawn.
  const times = { open: [], live: [] };
  window.sessionstoreTimes = times;

  async function showSession(id, leaf) {
    $("#list-view").hidden = true;
    $("#session-view").hidden = false;
    if (view && view.id === id) {
      view.selected = leaf;
      loadPath(true);
      return;
    }
    const started = performance.now();
    stopLive();
    view = {
      id: id, selected: leaf, es: null, seen: new Set(), changes: new Map(),
      total: 0, parents: [], col: [], taken: [], cols: 0, colRows: [], branchRows: new Set(),
      head: null, next: null, headRow: -1, nextRow: -1, lanes: [], last: null,
      pages: new Map(), fetching: new Map(), byId: new Map(), rowOf: new Map(), summaries: new Map(),
      onPath: new Uint8Array(0), path: null, opened: false,
      cursor: null, partial: {},
    };
    showPartial(view);
    const v = view;
    $("#graph").replaceChildren();
    $("#transcript").replaceChildren();
    let d;
    try {
      d = await getJSON("/api/sessions/" + id + "/layout");
    } catch (e) {
      showError(e);
      return;
    }
    if (view !== v) return;
    const s = d.session;
    const name = s.name || s.title || shortID(s.id);
    $("#crumb").textContent = "/ " + name;
    $("#meta").replaceChildren(
      el("b", { class: s.name ? null : "untitled", title: s.name ? null : "no name: its first prompt" }, s.name || s.title || "(no name)"),
      el("span", {}, "id " + s.id),
      el("span", {}, "dir " + (s.working_dir || "-")),
      el("span", {}, "model " + (s.model || "-")),
      el("span", {}, "created " + stamp(s.created_at)),
      el("span", {}, "updated " + stamp(s.updated_at)));
    $("#usage").replaceChildren();
    loadUsage(v);
    addRows(d.parents, 0);
    for (const r of d.branches) v.branchRows.add(r);
    setEnds(d.head, d.next, d.lanes, d.head_row, d.next_row);
    v.last = d.last;
    if (d.error) showError(d.error);
    buildGraph();
    const focus = v.nextRow >= 0 ? v.nextRow : v.total - 1;
    const box = $("#graph");
    box.scrollTop = Math.max(0, PAD + focus * ROW - box.clientHeight / 2);
    await Promise.all([drawGraph(), loadPath()]);
    if (view !== v) return;
    v.opened = true;
    times.open.push(performance.now() - started);
    startLive();
  }

  // addRows adds rows to the layout, from row from on, given their
  // parents' rows: a node's first child continues its column, every other
  // child starts a new one.
  function addRows(parents, from) {
    const v = view;
    for (let i = 0; i < parents.length; i++) {
      const r = from + i, p = parents[i];
      v.parents[r] = p;
      let c;
      if (p >= 0 && !v.taken[p]) {
        c = v.col[p];
        v.taken[p] = 1;
      } else {
        if (p >= 0) v.taken[p] = 1;
        c = v.cols++;
        v.colRows[c] = [];
      }
      v.col[r] = c;
      v.taken[r] = 0;
      v.colRows[c].push(r);
    }
    v.total = Math.max(v.total, from + parents.length);
  }

  // setEnds sets HEAD, the active path's end and the lanes, with their rows
  // when known (else as the nodes the page holds tell).
  function setEnds(head, next, lanes, headRow, nextRow) {
    const v = view;
    const rowOf = (id, given) => (given !== undefined && given !== null && given >= 0 ? given : id && v.rowOf.has(id) ? v.rowOf.get(id) : -1);
    const old = new Map(v.lanes.map((l) => [l.name + "\u0000" + l.tip, l.tip_row]));
    v.head = head;
    v.next = next || head;
    v.headRow = rowOf(head, headRow);
    v.nextRow = next ? rowOf(next, nextRow) : v.headRow;
    v.lanes = (lanes || []).map((l) => {
      let tr = rowOf(l.tip, l.tip_row);
      if (tr < 0 && old.has(l.name + "\u0000" + l.tip)) tr = old.get(l.name + "\u0000" + l.tip);
      return { name: l.name, tip: l.tip, active: l.active, tip_row: tr };
    });
  }

  // keepNodes keeps nodes, of rows from on, as the page's.
  function keepNodes(nodes, from) {
    const v = view;
    nodes.forEach((n, i) => {
      const r = from + i;
      const pg = Math.floor(r / NODE_PAGE);
      let page = v.pages.get(pg);
      if (!page) {
        page = [];
        v.pages.set(pg, page);
      }
      page[r - pg * NODE_PAGE] = n;
      v.byId.set(n.id, n);
      v.rowOf.set(n.id, r);
    });
  }

  // nodeAt returns the node of row r, or null when its page is not here yet.
  function nodeAt(r) {
    const page = view.pages.get(Math.floor(r / NODE_PAGE));
    return (page && page[r % NODE_PAGE]) || null;
  }

  // fetchPage fetches the page of nodes pg, once at a time; its promise
  // ends when the page is kept.
  function fetchPage(pg) {
    const v = view;
    if (v.fetching.has(pg)) return v.fetching.get(pg);
    const p = getJSON("/api/sessions/" + v.id + "/nodes?offset=" + pg * NODE_PAGE + "&limit=" + NODE_PAGE).then((ans) => {
      v.fetching.delete(pg);
      if (view !== v) return;
      keepNodes(ans.nodes, ans.offset);
      for (const l of v.lanes) if (l.tip_row < 0 && v.rowOf.has(l.tip)) l.tip_row = v.rowOf.get(l.tip);
    }, (e) => {
      v.fetching.delete(pg);
      if (view === v) showError(e);
    });
    v.fetching.set(pg, p);
    return p;
  }

  function startLive() {
    if (!view || !window.EventSource) return;
    const v = view;
    // last lets the server tell a continuation of the nodes the page
    // holds from another tree under the same id.
    // cursor, the id of the last message received, resumes the stream
    // exactly after it: the nodes after the ones the page holds, and the
    // deltas after the last one shown.
    const last = v.last ? "&last=" + v.last : "";
    const cursor = v.cursor ? "&cursor=" + encodeURIComponent(v.cursor) : "";
    const es = new EventSource("/api/sessions/" + v.id + "/live?known=" + v.total + last + cursor);
    v.es = es;
    es.onopen = () => setStatus("live", true);
    es.addEventListener("delta", (msg) => {
      if (view !== v) return;
      v.cursor = msg.lastEventId;
      const d = JSON.parse(msg.data);
      v.partial[d.kind] = (v.partial[d.kind] || "") + d.data;
      showPartial(v);
    });
    es.addEventListener("settled", (msg) => {
      if (view !== v) return;
      v.cursor = msg.lastEventId;
      v.partial = {};
      showPartial(v);
    });
    es.addEventListener("tree", (msg) => {
      if (view !== v) return;
      v.cursor = msg.lastEventId;
      const arrived = performance.now();
      const t = JSON.parse(msg.data);
      if (t.from !== v.total) {
        // Not a continuation of what the page holds: start over.
        es.close();
        v.es = null;
        const id = v.id, sel = v.selected;
        view = null;
        showSession(id, sel);
        return;
      }
      if (t.nodes.length === 0 && t.head === v.head && (t.next || t.head) === v.next &&
          JSON.stringify((t.lanes || []).map((l) => [l.name, l.tip, !!l.active])) === JSON.stringify(v.lanes.map((l) => [l.name, l.tip, !!l.active]))) {
        return; // nothing the page lacks (the stream's first look): no redraw
      }
      const box = $("#graph");
      const following = v.nextRow >= 0 && rowVisible(v.nextRow);
      const oldNext = v.next, oldNextRow = v.nextRow;
      addRows(t.nodes.map((n) => n.parent_row), t.from);
      keepNodes(t.nodes, t.from);
      for (const n of t.nodes) if (n.branch_from) v.branchRows.add(v.rowOf.get(n.id));
      if (t.nodes.length) v.last = t.nodes[t.nodes.length - 1].id;
      setEnds(t.head, t.next, t.lanes);
      sizeGraph();
      if (following && v.nextRow >= 0 && !rowVisible(v.nextRow)) {
        box.scrollTop = Math.max(0, PAD + v.nextRow * ROW - box.clientHeight + 3 * ROW);
      }
      const drawn = [drawGraph()];
      if (!v.selected) drawn.push(extendPath(oldNext, oldNextRow));
      if (t.nodes.length && !v.usageTimer) {
        // The totals follow a second later, once for a burst of updates:
        // they are read apart from the tree, not to slow its drawing.
        v.usageTimer = setTimeout(() => { v.usageTimer = null; if (view === v) loadUsage(v); }, USAGE_DELAY);
      }
      Promise.all(drawn).then(() => {
        if (view === v) times.live.push(performance.now() - arrived);
      });
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

  // loadUsage shows the session's token totals and its active branch's
  // (/usage), at most one request at a time: a request asked for while
  // one runs is made when it ends.
  async function loadUsage(v) {
    if (v.usageBusy) {
      v.usageAgain = true;
      return;
    }
    v.usageBusy = true;
    let u;
    try {
      u = await getJSON("/api/sessions/" + v.id + "/usage");
    } catch (e) {
      u = { session_error: String(e.message || e) };
    }
    v.usageBusy = false;
    if (view !== v) return;
    const part = (label, t, err) => el("span", { class: "usage-" + label, title: t ? usageTitle(t) : err || null },
      label + " tokens in/out " + (t ? tokenPair(t) + " (" + t.messages + " messages)" : "?"));
    $("#usage").replaceChildren(part("session", u.session, u.session_error), part("branch", u.branch, u.branch_error));
    if (v.usageAgain) {
      v.usageAgain = false;
      loadUsage(v);
    }
  }

  function usageTitle(t) {
    return (t.by_model || []).map((m) => (m.model || "(no model)") + ": in " + (m.input_tokens || 0) + ", out " + (m.output_tokens || 0) +
      ", cache read " + (m.cache_read_tokens || 0) + ", cache write " + (m.cache_write_tokens || 0)).join("\n");
  }

  // showPartial shows the answer being streamed: the deltas no event has
  // settled yet, by kind (text, reasoning, tool output), as text.
  function showPartial(v) {
    const box = $("#partial");
    const kinds = Object.keys(v.partial).filter((k) => v.partial[k]);
    box.hidden = kinds.length === 0;
    box.replaceChildren(...kinds.map((k) => el("div", { class: "partial-" + k },
      el("span", { class: "partial-kind" }, k + " (streaming)"), el("pre", {}, v.partial[k]))));
  }

  function stopLive() {
    if (view && view.es) {
      view.es.close();
      view.es = null;
    }
  }

  // ---- the tree ------------------------------------------------------------

  const ROW = 22, COL = 16, PAD = 12;

  function nodeLabel(n) {
    if (n.snapshot) {
      const label = snapshotLabel(n.preview);
      return "workspace snapshot" + (label ? " · " + label : "");
    }
    if (n.kind === "custom") return customLabel(n);
    if (n.preview) return n.preview;
    return n.role ? n.kind + " · " + n.role : n.kind;
  }

  // customLabel is a custom node's label: its record's summary when the
  // path brought it, else what the start of its record (the preview)
  // tells: its "type", or its first members' names.
  function customLabel(n) {
    const sum = view.summaries.get(n.id);
    if (sum) return sum;
    const p = n.preview || "";
    if (!p.startsWith("{")) return p || "custom";
    const m = /"type":"((?:[^"\\]|\\.)*)"/.exec(p);
    if (m) return "custom · " + m[1];
    const keys = [...p.matchAll(/[{,]"((?:[^"\\]|\\.)*)":/g)].map((k) => k[1]);
    return "custom · {" + keys.join(", ") + (keys.length ? ", …}" : "…}");
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
  // as its node in the tree says (or, before its node is here, its
  // record's start).
  function isSnapshot(ev) {
    const n = view && view.byId.get(ev.id);
    if (n) return !!n.snapshot;
    return ev.kind === "custom" && !!ev.record && typeof ev.record === "object" && ev.record.sessionstore === "snapshot";
  }

  // markPath marks the rows of the path ending at row leaf.
  function markPath(leaf) {
    const v = view;
    const on = new Uint8Array(v.total);
    for (let r = leaf, n = 0; r >= 0 && n <= v.total; r = v.parents[r], n++) on[r] = 1;
    v.onPath = on;
  }

  // buildGraph makes the tree's scroll box: a spacer as tall as every row,
  // and the SVG that draws the rows on screen, moved as the box scrolls.
  function buildGraph() {
    const box = $("#graph");
    const spacer = el("div", { id: "tree-spacer" });
    box.replaceChildren(spacer);
    box.onscroll = () => {
      if (view && !view.drawQueued) {
        view.drawQueued = true;
        requestAnimationFrame(() => { if (view) { view.drawQueued = false; drawGraph(); } });
      }
    };
    sizeGraph();
  }

  function sizeGraph() {
    const v = view;
    const spacer = $("#tree-spacer");
    if (!spacer) return;
    spacer.style.height = PAD * 2 + Math.max(v.total, 1) * ROW + "px";
    spacer.style.width = Math.max(PAD + v.cols * COL + 6 + 520, 400) + "px";
    $("#tree-count").textContent = "(" + v.total + " events, " + v.lanes.length + " lane" + (v.lanes.length === 1 ? "" : "s") + ")";
    $("#graph").dataset.total = String(v.total);
  }

  function rowVisible(r) {
    const box = $("#graph");
    const y = PAD + r * ROW;
    return y >= box.scrollTop && y + ROW <= box.scrollTop + box.clientHeight;
  }

  // firstAtOrAfter returns the index in rows (ascending) of the first row
  // at or after r.
  function firstAtOrAfter(rows, r) {
    let lo = 0, hi = rows.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (rows[mid] < r) lo = mid + 1; else hi = mid;
    }
    return lo;
  }

  // drawGraph draws the rows on screen (and OVERSCAN more each side),
  // fetching the pages of nodes they need; its promise ends when they are
  // drawn with their nodes.
  function drawGraph() {
    const v = view;
    const box = $("#graph");
    const spacer = $("#tree-spacer");
    if (!spacer) return Promise.resolve();
    const first = Math.max(0, Math.floor((box.scrollTop - PAD) / ROW) - OVERSCAN);
    const last = Math.min(v.total, Math.ceil((box.scrollTop + box.clientHeight) / ROW) + OVERSCAN);
    const need = new Set();
    for (let r = first; r < last; r++) if (!nodeAt(r)) need.add(Math.floor(r / NODE_PAGE));
    const missing = [...need].map(fetchPage);
    paint(first, last);
    if (missing.length === 0) return Promise.resolve();
    return Promise.all(missing).then(() => { if (view === v) paint(...visibleRows()); });
  }

  function visibleRows() {
    const box = $("#graph");
    return [Math.max(0, Math.floor((box.scrollTop - PAD) / ROW) - OVERSCAN),
      Math.min(view.total, Math.ceil((box.scrollTop + box.clientHeight) / ROW) + OVERSCAN)];
  }

  // paint draws rows [first, last) into a new SVG placed at their height.
  function paint(first, last) {
    const v = view;
    const spacer = $("#tree-spacer");
    if (!spacer) return;
    if (v.onPathFor !== (v.selectedRow !== undefined && v.selected ? v.selectedRow : v.nextRow) || v.onPath.length !== v.total) {
      v.onPathFor = v.selected && v.selectedRow !== undefined ? v.selectedRow : v.nextRow;
      markPath(v.onPathFor);
    }
    const on = v.onPath;
    const tips = new Map();
    for (const l of v.lanes) {
      if (l.tip_row < 0) continue;
      if (!tips.has(l.tip_row)) tips.set(l.tip_row, []);
      tips.get(l.tip_row).push(l);
    }
    const labelX = PAD + v.cols * COL + 6;
    const width = Math.max(labelX + 520, 400);
    const top = PAD + first * ROW; // the SVG's top, in the spacer
    const height = Math.max(last - first, 1) * ROW;
    const root = svg("svg", { width: width, height: height, viewBox: "0 0 " + width + " " + height, id: "tree-svg", role: "img", "aria-label": "event tree", "data-first": first, "data-last": last });
    root.style.position = "absolute";
    root.style.top = top + "px";
    root.style.left = "0";
    const xOf = (r) => PAD + v.col[r] * COL;
    const yOf = (r) => (r - first) * ROW + ROW / 2;
    const rows = svg("g", { class: "rows" });
    const edges = svg("g", { class: "edges" });
    const marks = svg("g", { class: "nodes" });
    const labels = svg("g", { class: "labels" });
    const edge = (r) => {
      const p = v.parents[r];
      if (p < 0) return;
      const x = xOf(r), y = yOf(r), px = xOf(p), py = yOf(p);
      const d = px === x ? `M${px},${py} L${x},${y}` : `M${px},${py} Q${x},${py} ${x},${py + ROW * 0.8} L${x},${y}`;
      const cls = ["edge"];
      if (v.branchRows.has(r)) cls.push("branch");
      if (on[r]) cls.push("on-path");
      edges.append(svg("path", { class: cls.join(" "), d: d }));
    };
    // The edges that cross the rows drawn from a row below them.
    for (let c = 0; c < v.cols; c++) {
      const cr = v.colRows[c];
      const i = firstAtOrAfter(cr, last);
      if (i < cr.length && v.parents[cr[i]] >= 0 && v.parents[cr[i]] < last) edge(cr[i]);
    }
    for (let r = first; r < last; r++) {
      const x = xOf(r), y = yOf(r);
      edge(r);
      const n = nodeAt(r);
      if (!n) {
        marks.append(svg("circle", { class: "pending", cx: x, cy: y, r: 4 }));
        continue;
      }
      const bg = svg("rect", { class: "row", x: 0, y: y - ROW / 2, width: width, height: ROW, fill: "transparent", "data-id": n.id });
      bg.addEventListener("click", () => select(n.id));
      rows.append(bg);
      const cls = ["node", n.kind];
      if (n.kind === "message" && n.role) cls.push("message-" + n.role);
      if (n.snapshot) cls.push("snapshot");
      if (on[r]) cls.push("on-path");
      if (n.id === v.selected) cls.push("selected");
      if (r === v.headRow) cls.push("head");
      const attrs = { class: cls.join(" "), "data-id": n.id, "data-kind": n.kind, "data-role": n.role || "", "data-row": r };
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
      if (r === v.headRow) marks.append(svg("circle", { class: "head-ring", cx: x, cy: y, r: 9.5 }));
      if (r === v.nextRow && v.next !== v.head) marks.append(svg("circle", { class: "next-ring", cx: x, cy: y, r: 9.5 }));

      let lx = labelX;
      const tag = (text, kind) => {
        const w = [...text].length * 7 + 10;
        labels.append(svg("rect", { class: "tag-bg " + kind, x: lx, y: y - 7, width: w, height: 14, rx: 3 }));
        labels.append(svg("text", { class: "tag " + kind.split(" ")[0], x: lx + 4, y: y + 4 }, text));
        lx += w + 4;
      };
      if (r === v.headRow) tag("HEAD", "head");
      if (r === v.nextRow && v.next !== v.head) tag("NEXT", "next");
      if (n.snapshot) tag("files", "files");
      for (const l of tips.get(r) || []) tag("⎇ " + l.name, "lane" + (l.active ? " active" : ""));
      const label = svg("text", { class: "label" + (on[r] ? "" : " off-path"), x: lx, y: y + 4, "data-id": n.id }, cut(nodeLabel(n), 90));
      label.addEventListener("click", () => select(n.id));
      labels.append(label);
    }
    root.append(rows, edges, marks, labels);
    const old = $("#tree-svg");
    if (old) old.replaceWith(root); else spacer.append(root);
  }

  function select(id) {
    location.hash = id === view.next ? "#/s/" + view.id : "#/s/" + view.id + "/e/" + id;
  }

  // ---- the path as a transcript ---------------------------------------------
  //
  // view.path is the part of the path the page holds: its events from
  // index offset to the path's end (total), newest last. The page asks for
  // the newest PATH_PAGE events, then for earlier ones when the reader
  // asks; a live append asks for the new events only.

  let pathSeq = 0;

  function pathURL(v, leaf, offset, limit) {
    const ctx = $("#context-only").checked;
    let url = "/api/sessions/" + v.id + "/path?context=" + (ctx ? 1 : 0) + "&limit=" + limit;
    if (offset !== null) url += "&offset=" + offset;
    if (leaf) url += "&leaf=" + leaf;
    return url;
  }

  // loadPath fetches the newest page of the path shown (the selected
  // event's, else the active one) and shows it; with reveal, it also
  // scrolls the tree to the path's end when that is off screen.
  async function loadPath(reveal) {
    const v = view;
    const seq = ++pathSeq;
    $("#to-head").hidden = !v.selected;
    let p;
    try {
      p = await getJSON(pathURL(v, v.selected, null, PATH_PAGE));
    } catch (e) {
      if (seq === pathSeq) showError(e);
      return;
    }
    if (seq !== pathSeq || view !== v) return;
    v.path = { leaf: p.leaf, context: p.context, offset: p.offset || 0, total: p.total || 0, error: p.error || "" };
    v.selectedRow = v.selected ? (p.leaf_row >= 0 ? p.leaf_row : v.rowOf.has(v.selected) ? v.rowOf.get(v.selected) : -1) : undefined;
    const list = $("#transcript");
    const open = new Set([...list.querySelectorAll("details[open]")].map((d) => d.closest(".ev").dataset.id + "/" + d.dataset.part));
    const fresh = v.seen.size > 0;
    list.replaceChildren();
    list.append(earlierItem(v));
    appendEvents(v, p.events, fresh, open);
    if (p.error) list.append(el("li", { class: "ev path-error" }, el("span", { class: "error" }, p.error)));
    pathTitle(v);
    if (!$("#tree-spacer")) return;
    const end = v.selected ? v.selectedRow : v.nextRow;
    if (reveal && end >= 0 && !rowVisible(end)) {
      const box = $("#graph");
      box.scrollTop = Math.max(0, PAD + end * ROW - box.clientHeight / 2);
      drawGraph();
    } else {
      paint(...visibleRows());
    }
  }

  function pathTitle(v) {
    const p = v.path;
    // The active path ends at HEAD, or at NEXT while a lane switch is pending.
    const end = p.leaf === v.head ? "HEAD " : "NEXT ";
    $("#path-title").textContent = (v.selected ? "to " + shortID(p.leaf) : "active, to " + end + shortID(p.leaf)) + " · " + p.total + " events";
  }

  // earlierItem is the transcript's first item: a button that fetches the
  // page before the events shown, when there is one.
  function earlierItem(v) {
    const li = el("li", { id: "earlier" });
    const draw = () => {
      const n = v.path.offset;
      li.replaceChildren();
      li.hidden = n === 0;
      if (n === 0) return;
      const b = el("button", { type: "button" }, "show earlier events (" + n + " before these)");
      b.addEventListener("click", async () => {
        b.disabled = true;
        const from = Math.max(0, n - PATH_PAGE);
        const seq = pathSeq;
        let p;
        try {
          p = await getJSON(pathURL(v, v.path.leaf, from, n - from));
        } catch (e) {
          b.disabled = false;
          showError(e);
          return;
        }
        if (seq !== pathSeq || view !== v) return;
        const frag = document.createDocumentFragment();
        for (const ev of p.events) frag.append(eventItem(v, ev, false, null));
        li.after(frag);
        v.path.offset = p.offset;
        draw();
      });
      li.append(b);
    };
    v.path.redrawEarlier = draw;
    draw();
    return li;
  }

  function eventItem(v, ev, fresh, open) {
    if (ev.kind === "custom" && ev.summary) v.summaries.set(ev.id, ev.summary);
    const li = renderEvent(ev);
    if (fresh && !v.seen.has(ev.id)) li.classList.add("new");
    v.seen.add(ev.id);
    if (open) {
      for (const d of li.querySelectorAll("details")) {
        if (open.has(ev.id + "/" + d.dataset.part)) d.open = true;
      }
    }
    return li;
  }

  function appendEvents(v, events, fresh, open) {
    const frag = document.createDocumentFragment();
    for (const ev of events) frag.append(eventItem(v, ev, fresh, open));
    $("#transcript").append(frag);
  }

  // extendPath shows a live update's change of the active path: when the
  // path held ended at the old end (oldNext, of row oldRow) and the new
  // end descends from it, only the events after it are fetched and
  // added; otherwise the newest page is fetched again.
  async function extendPath(oldNext, oldRow) {
    const v = view;
    const p = v.path;
    if (!p || p.context || p.error || p.leaf !== oldNext || oldRow < 0 || v.nextRow < 0) return loadPath();
    let depth = 0, r = v.nextRow;
    while (r >= 0 && r !== oldRow && depth <= v.total) { r = v.parents[r]; depth++; }
    if (r !== oldRow) return loadPath();
    if (depth === 0) { pathTitle(v); return; }
    if (depth > PATH_PAGE) return loadPath();
    const seq = ++pathSeq;
    let ans;
    try {
      ans = await getJSON(pathURL(v, v.next, p.total, depth));
    } catch (e) {
      if (seq === pathSeq) showError(e);
      return;
    }
    if (seq !== pathSeq || view !== v) return;
    if (ans.offset !== p.total || ans.total !== p.total + depth) return loadPath();
    appendEvents(v, ans.events, true, null);
    p.leaf = ans.leaf;
    p.total = ans.total;
    if (ans.error) {
      p.error = ans.error;
      $("#transcript").append(el("li", { class: "ev path-error" }, el("span", { class: "error" }, ans.error)));
    }
    pathTitle(v);
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
      case "custom": return isSnapshot(ev) ? "manifest" : ev.summary || "custom record";
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
      case "custom":
        if (!isSnapshot(ev)) {
          // A readable line, the JSON a click away.
          put(frag, el("div", { class: "custom-summary" }, ev.summary || "custom record"),
            el("details", { "data-part": "raw", class: "raw" }, el("summary", {}, "raw JSON"), el("pre", {}, pretty(r._value !== undefined ? r._value : r))));
          break;
        }
        put(frag, collapsed("record", summaryLine(ev, r), el("pre", {}, pretty(r._value !== undefined ? r._value : r))));
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
