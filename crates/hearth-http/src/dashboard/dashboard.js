// Hearth's live dashboard: polls api/status, keeps ten minutes of samples
// and draws the figures, tables and hand-made SVG charts. Everything from
// the server goes into the page as text (textContent, attributes), never as
// HTML: paths and URIs come from clients.
'use strict';
(() => {
  const KEEP = 600; // samples kept: ten minutes, one a second
  const WINDOW = 600; // seconds shown on the charts' time axis
  const KEY = 'hearth-dashboard-token';
  const NS = 'http://www.w3.org/2000/svg';
  const DASH = '—';
  const $ = (id) => document.getElementById(id);

  let hist = []; // samples, oldest first
  let now = 0; // the server's time at the last answer
  let timer = 0;
  let inflight = false;
  let again = false;
  let actionsOn = false;
  let token = sessionStorage.getItem(KEY) || '';

  // ---- building DOM ----------------------------------------------------

  // An HTML element with attributes (null ones skipped) and children
  // (strings become text nodes).
  function h(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) if (v != null) e.setAttribute(k, v);
    e.append(...kids.filter((k) => k != null).map((k) => (typeof k === 'object' ? k : String(k))));
    return e;
  }

  // An SVG element; `text` (optional) becomes its text content.
  function s(tag, attrs, text) {
    const e = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text != null) e.textContent = text;
    return e;
  }

  // ---- formatting ------------------------------------------------------

  const num = (v) => (v == null ? DASH : Number.isInteger(v) ? String(v) : String(+v.toFixed(2)));
  const ms = (sec) => {
    if (sec == null) return DASH;
    const m = sec * 1000;
    return m >= 1000 ? (m / 1000).toFixed(2) + ' s' : +m.toFixed(m < 10 ? 2 : m < 100 ? 1 : 0) + ' ms';
  };
  // A duration in its two largest units: "45 s", "5 min 12 s", "3 h".
  function dur(sec) {
    if (sec == null) return DASH;
    if (sec < 60) return Math.max(0, sec).toFixed(sec < 10 ? 1 : 0) + ' s';
    const units = [[86400, 'd'], [3600, 'h'], [60, 'min'], [1, 's']];
    const i = units.findIndex(([k]) => sec >= k);
    const [k1, u1] = units[i];
    const [k2, u2] = units[i + 1];
    const q2 = Math.floor((sec % k1) / k2);
    return Math.floor(sec / k1) + ' ' + u1 + (q2 ? ' ' + q2 + ' ' + u2 : '');
  }
  const took = (sec) => (sec != null && sec >= 60 ? dur(sec) : ms(sec));
  const ago = (t) => (t == null ? DASH : dur(now - t) + ' ago');
  const mib = (b) => (b == null ? DASH : (b / 1048576).toFixed(1));
  // A growth in bytes, signed: "+12.0 KiB", "-512 B" (as hearth status says it).
  function growth(b) {
    if (b == null) return DASH;
    const a = Math.abs(b);
    const sign = b < 0 ? '-' : '+';
    if (a < 1024) return sign + a + ' B';
    if (a < 1048576) return sign + (a / 1024).toFixed(1) + ' KiB';
    return sign + (a / 1048576).toFixed(1) + ' MiB';
  }
  const pct = (share) => (share == null ? DASH : Math.round(share * 100) + '%');
  const path = (p) => String(p ?? '').split('?')[0]; // never a query string
  const label = (k) => k.replace(/_/g, ' ');
  // Any JSON value as short text, for shapes the page does not know.
  function show(v, k = '') {
    if (v == null) return DASH;
    if (Array.isArray(v)) return v.map((x) => show(x)).join(', ') || DASH;
    if (typeof v === 'object') {
      return Object.entries(v).filter(([, b]) => b != null && b !== '').map(([a, b]) => a + ' ' + show(b, a)).join(', ') || DASH;
    }
    if (typeof v !== 'number') return k === 'uri' || k === 'path' ? path(v) : String(v);
    if (k === 'memory') return mib(v) + ' MiB';
    if (k === 'age' || k === 'uptime') return dur(v);
    if (k === 'seconds') return took(v);
    return num(v);
  }
  const kv = (obj) => Object.entries(obj || {}).map(([k, v]) => [k, label(k), show(v, k)]);

  // ---- tables and figures ---------------------------------------------

  // Fills a <dl class="cards"> from [field, label, text] entries.
  function cards(dl, list) {
    dl.replaceChildren(...list.map(([f, l, t]) => h('div', null, h('dt', null, l), h('dd', { 'data-field': f }, t))));
  }

  // Updates a table body in place, one row per item keyed by key(item, i)
  // in the attribute `attr`: rows stay (and so does keyboard focus on
  // their buttons), only changed cells get new text. cells(item) gives
  // [field, text] pairs, the first one the row's header; extra(item) makes
  // a last cell once (buttons).
  function rows(tbody, items, attr, key, cells, extra) {
    const old = new Map([...tbody.rows].map((r) => [r.getAttribute(attr), r]));
    items.forEach((it, i) => {
      const k = String(key(it, i));
      const c = cells(it);
      let r = old.get(k);
      old.delete(k);
      if (r && r.cells.length !== c.length + (extra ? 1 : 0)) {
        r.remove(); // the columns changed
        r = null;
      }
      if (!r) {
        r = h('tr', { [attr]: k });
        c.forEach(([f], j) => r.append(h(j ? 'td' : 'th', { scope: j ? null : 'row', 'data-field': f })));
        if (extra) r.append(extra(it));
      }
      c.forEach(([, t], j) => {
        if (r.cells[j].textContent !== t) r.cells[j].textContent = t;
      });
      if (tbody.rows[i] !== r) tbody.insertBefore(r, tbody.rows[i] || null);
    });
    for (const r of old.values()) {
      // A row going away with the focus in it hands the focus to its table.
      if (r.contains(document.activeElement)) tbody.closest('.scroll').focus();
      r.remove();
    }
  }

  // A table's title (the heading naming it) with a suffix: a count, "none".
  function caption(table, suffix) {
    const c = $(table.getAttribute('aria-labelledby'));
    c.dataset.base ??= c.textContent;
    c.textContent = c.dataset.base + suffix;
  }

  // A table of objects of any shape: one column per key seen.
  function generic(table, list) {
    list = Array.isArray(list) ? list.filter((o) => o && typeof o === 'object') : [];
    const cols = [...new Set(list.flatMap(Object.keys))];
    if (table.tHead.textContent !== cols.map(label).join('')) {
      table.tHead.replaceChildren(h('tr', null, ...cols.map((c) => h('th', { scope: 'col' }, label(c)))));
    }
    rows(table.tBodies[0], list, 'data-key', (o, i) => (o.pid ?? 'i') + '/' + i, (o) => cols.map((c) => [c, show(o[c], c)]));
    caption(table, list.length ? ': ' + list.length : ': none');
  }

  // ---- drawing the status ---------------------------------------------

  const KNOWN = new Set(['version', 'pid', 'listen', 'script', 'uptime', 'stopping', 'pool', 'pools', 'workers', 'mode', 'classic', 'work', 'calls', 'routes']);

  function drawHead(d) {
    const st = d.status || {};
    const pools = several(st);
    const bits = ['hearth ' + (st.version ?? ''), d.command, st.mode, st.pid && 'pid ' + st.pid, st.listen && 'listening on ' + st.listen, st.uptime != null && 'up ' + dur(st.uptime), pools ? pools.length + ' pools' : st.script, st.stopping && 'STOPPING'];
    $('summary').textContent = bits.filter(Boolean).join(' · ');
  }

  // The route a pool takes, as hearth status prints it.
  function route(p) {
    const parts = (p.host || []).map((x) => 'host ' + x).concat((p.path || []).map((x) => x + '*'));
    return parts.length ? parts.join(', ') : 'every other request';
  }
  const reasons = (o) => Object.entries(o || {}).filter(([, v]) => v).map(([k, v]) => k + ' ' + v).join(', ') || 'none';
  const total = (o) => Object.values(o || {}).reduce((a, b) => a + (b || 0), 0);

  // Why a failing pool fails, since when, and when it tries again.
  function failing(f) {
    if (!f) return '';
    const what = f.cause === 'boot' ? 'workers fail to boot' : f.cause === 'requests' ? 'workers die on requests' : String(f.cause);
    const next = f.next_attempt > 0 ? 'next try in ' + dur(f.next_attempt) : 'trying again now';
    return 'Failing: ' + what + ' (since ' + ago(f.since) + ', ' + num(f.attempts) + ' in a row; ' + next + '). Last error: ' + (f.last_error || DASH);
  }

  // One pool's figures: the counts, and the sizing ones where the server
  // gives them (worker mode; php-fpm has none).
  function poolFigures(p) {
    const sizing = 'booting' in p;
    const state = p.state === 'failing' ? 'FAILING (' + (p.failing_state?.cause ?? '?') + ')' : p.state;
    return [
      ['state', 'state', state],
      ['live', 'live workers', num(p.live)],
      ['busy', 'busy', num(p.busy)],
      ['idle', 'idle', num(p.idle)],
      ['queue', 'waiting', num(p.queue)],
      ['min_workers', 'min workers', num(p.min_workers)],
      ['max_workers', 'max workers', num(p.max_workers)],
      sizing && ['booting', 'booting', num(p.booting) + ' (at most ' + num(p.max_booting) + ')'],
      sizing && ['memory', 'memory (MiB)', mib(p.memory)],
      sizing && ['max_pool_memory', 'memory budget (MiB)', p.max_pool_memory == null ? 'none' : mib(p.max_pool_memory)],
      ['failing', sizing ? 'failing to boot' : 'failing', num(p.failing)],
      ['started', 'started', num(p.started)],
      sizing && ['started_by_reason', 'started by reason', reasons(p.started_by_reason)],
      sizing && ['retired', 'retired', num(total(p.retired_by_reason))],
      sizing && ['retired_by_reason', 'retired by reason', reasons(p.retired_by_reason)],
      sizing && ['refused', 'refused for memory', num(p.refused?.memory)],
      sizing && ['request_crashes', 'died on a request', num(p.request_crashes)],
      ['restarts', 'restarts', num(p.restarts)],
      ['restarts_by_reason', 'restarts by reason', reasons(p.restarts_by_reason)],
    ].filter((c) => c && c[2] != null);
  }

  // A section per pool (untitled when the server has only one): its
  // route and script, its failing state while it fails, its figures.
  function drawPoolCards(list, titled) {
    const box = $('pools');
    while (box.children.length > list.length) box.lastChild.remove();
    list.forEach((q, i) => {
      let b = box.children[i];
      if (!b) {
        b = h('section', { class: 'pool', 'aria-labelledby': 'h-pool-' + i },
          h('h3', { id: 'h-pool-' + i }), h('p', { class: 'failing', 'data-field': 'failing_state' }), h('dl', { class: 'cards' }));
        box.append(b);
      }
      b.dataset.pool = q.name;
      const title = b.querySelector('h3');
      title.hidden = !titled;
      const text = 'Pool ' + q.name + ': ' + route(q) + (q.script ? ' · ' + q.script : '');
      if (title.textContent !== text) title.textContent = text;
      const why = failing(q.pool.failing_state);
      const banner = b.querySelector('p.failing');
      banner.hidden = !why;
      if (banner.textContent !== why) banner.textContent = why;
      cards(b.querySelector('dl'), poolFigures(q.pool));
    });
  }

  // Adds the Pool column (the second) to a table's head, or takes it
  // away, as the server has several pools or one.
  function poolColumn(table, on) {
    const tr = table.tHead.rows[0];
    const has = tr.cells[1]?.dataset.col === 'pool';
    if (on && !has) tr.insertBefore(h('th', { scope: 'col', 'data-col': 'pool' }, 'Pool'), tr.cells[1]);
    if (!on && has) tr.cells[1].remove();
  }
  // A row's [field, text] cells with its pool's name second, when there
  // are several pools.
  const withPool = (cells, item, on) => (on ? [cells[0], ['pool', item.pool ?? DASH], ...cells.slice(1)] : cells);
  // What get(pool) lists, of every pool, each item with its pool's name.
  const ofPools = (pools, get) => pools.flatMap((q) => (get(q) || []).map((x) => ({ ...x, pool: q.name })));
  // The pools of a server that has several (status.pools), or null.
  const several = (st) => (Array.isArray(st.pools) && st.pools.length > 1 ? st.pools : null);

  function drawPool(d) {
    const st = d.status || {};
    const pools = several(st);
    $('pool-section').hidden = !st.pool && !(st.workers || []).length;
    const list = pools || (st.pool ? [{ name: st.pool.name ?? 'default', pool: st.pool }] : []);
    drawPoolCards(list.filter((q) => q.pool), !!pools);
    const workers = pools ? ofPools(pools, (q) => q.workers) : st.workers || [];
    poolColumn($('workers'), !!pools);
    rows($('workers').tBodies[0], workers, 'data-pid', (w) => w.pid, (w) => {
      const r = w.request;
      const req = r ? [r.method, path(r.uri)].filter(Boolean).join(' ') + ' (' + took(r.seconds) + ')' : DASH;
      return withPool([['pid', num(w.pid)], ['slot', num(w.slot)], ['state', w.state ?? DASH], ['request', req],
        ['requests', num(w.requests)], ['memory', mib(w.memory)], ['age', dur(w.age)]], w, !!pools);
    });
    caption($('workers'), ': ' + workers.length);
    // Every pool's, newest first, as many as one pool keeps.
    const past = pools
      ? ofPools(pools, (q) => q.past_workers).sort((a, b) => (b.ended ?? 0) - (a.ended ?? 0)).slice(0, 50)
      : d.past_workers || [];
    poolColumn($('past-workers'), !!pools);
    rows($('past-workers').tBodies[0], past, 'data-key', (w) => (w.pool ?? '') + ':' + w.pid + '@' + w.ended, (w) => withPool([
      ['pid', num(w.pid)], ['slot', num(w.slot)], ['reason', w.reason ?? DASH], ['ended', ago(w.ended)],
      ['requests', num(w.requests)], ['age', dur(w.age)]], w, !!pools));
    caption($('past-workers'), past.length ? '' : ': none yet');
  }

  // The routes whose requests grew workers most, most first (the
  // server's order; with several pools, every pool's by growth), from
  // each worker's memory after each request.
  function drawRoutes(d) {
    const st = d.status || {};
    const pools = several(st);
    const r = st.routes;
    $('routes').parentElement.hidden = $('cap-routes').hidden = !r;
    if (!r) return;
    const top = pools
      ? ofPools(pools, (q) => q.routes?.top).sort((a, b) => (b.growth ?? 0) - (a.growth ?? 0)).slice(0, 20)
      : r.top || [];
    const counted = pools ? pools.reduce((a, q) => a + (q.routes?.counted || 0), 0) : r.counted;
    poolColumn($('routes'), !!pools);
    rows($('routes').tBodies[0], top, 'data-route', (x) => (pools ? x.pool + ' ' : '') + x.route, (x) => withPool([
      ['route', String(x.route ?? DASH)], ['requests', num(x.requests)], ['grew_share', pct(x.grew_share)],
      ['growth', growth(x.growth)], ['mean', growth(x.mean)]], x, !!pools));
    caption($('routes'), top.length ? ' (' + top.length + ' of ' + num(counted) + ' routes)' : ': none measured yet');
  }

  function drawClassic(d) {
    const st = d.status || {};
    const mixed = st.classic && typeof st.classic === 'object';
    $('classic').hidden = !(mixed || st.mode === 'classic');
    // Fields this page has no place for (php_fpm, root...) as they come.
    const rest = kv(Object.fromEntries(Object.entries(st).filter(([k]) => !KNOWN.has(k))));
    cards($('classic-pool'), mixed ? kv(st.classic.pool).concat(rest) : rest);
    // In classic mode php-fpm's children are the Workers table above.
    $('classic-workers').parentElement.hidden = $('cap-classic').hidden = !mixed;
    $('h-pool').textContent = st.mode === 'classic' ? "Workers: php-fpm's children" : 'Workers';
    if (mixed) generic($('classic-workers'), st.classic.workers);
  }

  function drawSlow(d) {
    const slow = d.slow || [];
    rows($('slow').tBodies[0], slow, 'data-key', (r, i) => i, (r) => [
      ['method', r.method ?? DASH], ['path', path(r.path)], ['status', num(r.status)], ['seconds', took(r.seconds)],
      ['worker', num(r.worker)], ['at', ago(r.at)]]);
    caption($('slow'), slow.length ? '' : ': none');
  }

  function drawWork(d) {
    const st = d.status || {};
    const w = st.work;
    const c = st.calls;
    const qs = d.queues || [];
    const work = $('work');
    work.hidden = !(w || c || qs.length || d.command === 'work');
    // hearth work serves no HTTP: its jobs take the traffic's place.
    $('traffic').hidden = d.command === 'work';
    if (!work.hidden && work.nextElementSibling !== $('traffic')) $('traffic').before(work);
    $('work-figures').hidden = $('work-figures').previousElementSibling.hidden = !w;
    if (w) cards($('work-figures'), kv(Object.fromEntries(Object.entries(w).filter(([k]) => k !== 'queue_stats'))));
    $('calls-figures').hidden = $('h-calls').hidden = !c;
    if (c) cards($('calls-figures'), kv(c));
    drawQueues(qs);
  }

  const STATS = [['pushed', 'enqueued'], ['reserved', 'running'], ['done', 'done'], ['failed', 'failed'], ['retried', 'retried'],
    ['dead', 'dead'], ['died', 'died'], ['ready', 'ready'], ['delayed', 'delayed']];

  // One block per queue; the first one's ids are #queue-stats and #dead,
  // the next ones' get a suffix (-1, -2...).
  function drawQueues(qs) {
    const box = $('queues');
    while (box.children.length > qs.length) box.lastChild.remove();
    qs.forEach((q, i) => {
      const sfx = i ? '-' + i : '';
      let b = box.children[i];
      if (!b) {
        b = h('section', { 'aria-labelledby': 'h-queue' + sfx, 'data-queue': i },
          h('h3', { id: 'h-queue' + sfx }),
          h('dl', { id: 'queue-stats' + sfx, class: 'cards' }),
          h('h4', { id: 'cap-dead' + sfx }, 'Dead jobs (oldest first)'),
          h('div', { class: 'scroll', tabindex: 0, role: 'region', 'aria-labelledby': 'cap-dead' + sfx },
            h('table', { id: 'dead' + sfx, 'aria-labelledby': 'cap-dead' + sfx },
              h('thead', null, h('tr', null, ...['ID', 'Attempts', 'Enqueued', 'Reason', 'Error', 'Actions'].map((t) => h('th', { scope: 'col' }, t)))),
              h('tbody'))),
          h('p', { class: 'buttons' }, ...['ready', 'delayed', 'dead'].map((p) =>
            h('button', { type: 'button', class: 'act danger', 'data-action': 'purge', 'data-part': p }, 'Purge ' + p + ' jobs'))));
        box.append(b);
        locks();
      }
      b.dataset.url = q.url;
      b.querySelector('h3').textContent = 'Queue ' + q.url;
      const st = q.stats || {};
      const dl = b.querySelector('dl');
      if (st.error != null) cards(dl, [['error', 'statistics unavailable', show(st.error)]]);
      else {
        const age = st.oldest_ready_age_ms;
        cards(dl, STATS.map(([k, l]) => [k, l, num(st[k])]).concat([['oldest_ready_age_ms', 'oldest ready job', age == null ? DASH : dur(age / 1000)]]));
      }
      const table = b.querySelector('table');
      const dead = Array.isArray(q.dead) ? q.dead : [];
      rows(table.tBodies[0], dead, 'data-id', (j) => j.id, (j) => [
        ['id', num(j.id)], ['attempts', num(j.attempts) + (j.max_attempts != null ? ' of ' + j.max_attempts : '')],
        ['enqueued', ago(j.enqueued)], ['reason', j.reason ?? DASH], ['error', j.error ?? DASH]],
      (j) => h('td', null,
        h('button', { type: 'button', class: 'act', 'data-action': 'retry', 'aria-label': 'Retry job ' + j.id, disabled: token && actionsOn ? null : '' }, 'Retry'),
        ' ',
        h('button', { type: 'button', class: 'act danger', 'data-action': 'delete', 'aria-label': 'Delete job ' + j.id, disabled: token && actionsOn ? null : '' }, 'Delete')));
      caption(table, q.dead && q.dead.error != null ? ': could not be read (' + show(q.dead.error) + ')' : ': ' + (dead.length || 'none'));
    });
  }

  // ---- charts ----------------------------------------------------------

  // A round step for about `n` ticks up to max: 1, 2 or 5 times a power of ten.
  function step(max, int, n = 4) {
    const raw = max > 0 ? max / n : 1;
    const p = 10 ** Math.floor(Math.log10(raw));
    const m = raw / p;
    const st = (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
    return int ? Math.max(1, Math.round(st)) : st;
  }
  const tick = (v) => (v >= 1000 ? +(v / 1000).toPrecision(3) + 'k' : String(+v.toPrecision(3)));
  const r1 = (v) => Math.round(v * 10) / 10;

  // Draws the chart of figure #id: panels stacked, each with its own y axis
  // ({unit, int, bars, series: [{name, k, dash, v(sample, i)}]}), over the
  // last ten minutes. The figcaption gives the latest values in words (the
  // text alternative); data-latest the headline number.
  function chart(id, title, panels, words, latest) {
    const fig = $(id);
    // The viewBox follows the figure's width so text stays at its size;
    // between redraws the SVG scales with it (width 100%).
    const W = Math.max(300, Math.round((fig.querySelector('svg') || fig).getBoundingClientRect().width) || 600);
    const L = 46, R = 16, PH = 110, G = 24, B = 24;
    const HT = panels.length * (PH + G) + B;
    const t0 = now - WINDOW;
    const x = (t) => L + ((t - t0) / WINDOW) * (W - L - R);
    const shown = hist.filter((smp) => smp.t > t0);
    const svg = s('svg', { viewBox: `0 0 ${W} ${HT}`, role: 'img', 'aria-label': title + ' over the last 10 minutes', class: 'chart' });
    panels.forEach((p, k) => {
      const top = G + k * (PH + G);
      const bot = top + PH;
      let max = 0;
      shown.forEach((smp) => {
        const vs = p.series.map((se) => se.v(smp) || 0);
        max = Math.max(max, p.bars ? vs.reduce((a, b) => a + b, 0) : Math.max(...vs));
      });
      const st = step(max, p.int);
      const hi = Math.max(st, Math.ceil(max / st) * st);
      const y = (v) => bot - (v / hi) * PH;
      svg.append(s('text', { x: 2, y: top - 8, class: 'unit' }, p.unit));
      for (let v = 0; v <= hi + st / 2; v += st) {
        svg.append(s('line', { x1: L, x2: W - R, y1: r1(y(v)), y2: r1(y(v)), class: v ? 'grid' : 'axis' }));
        svg.append(s('text', { x: L - 5, y: r1(y(v)) + 4, 'text-anchor': 'end' }, tick(v)));
      }
      if (p.bars) {
        // Stacked bars, one second wide; each series one path of rectangles.
        const w = Math.max(0.5, (W - L - R) / WINDOW);
        const base = shown.map(() => 0);
        for (const se of p.series) {
          let dd = '';
          shown.forEach((smp, i) => {
            const v = se.v(smp) || 0;
            if (!v) return;
            const x0 = r1(x(smp.t - 1));
            dd += `M${x0} ${r1(y(base[i] + v))}h${r1(w)}V${r1(y(base[i]))}H${x0}Z`;
            base[i] += v;
          });
          svg.append(s('path', { d: dd, class: 'bar ' + se.k }));
        }
      } else {
        // Lines, broken where a value is missing or samples are not contiguous.
        for (const se of p.series) {
          let dd = '';
          let prev = null;
          shown.forEach((smp) => {
            const v = se.v(smp);
            if (v == null) return void (prev = null);
            const pt = r1(x(smp.t)) + ' ' + r1(y(v));
            dd += prev != null && smp.t - prev < 2.5 ? 'L' + pt : 'M' + pt + 'h0';
            prev = smp.t;
          });
          svg.append(s('path', { d: dd, class: 'line ' + se.k + (se.dash ? ' ' + se.dash : '') }));
        }
      }
    });
    // Time axis: minutes ago.
    const yb = HT - B;
    for (let m = 10; m >= 0; m -= 2) {
      const xx = r1(x(now - m * 60));
      svg.append(s('line', { x1: xx, x2: xx, y1: yb, y2: yb + 4, class: 'axis' }));
      svg.append(s('text', { x: xx, y: yb + 17, 'text-anchor': 'middle' }, m ? '\u2212' + m + ' min' : 'now'));
    }
    const series = panels.flatMap((p) => p.series.map((se) => [se, p.bars]));
    const legend = series.length > 1
      ? h('ul', { class: 'legend' }, ...series.map(([se, bars]) => h('li', null, h('span', { class: ['sw', se.k, bars ? 'box' : 'line', se.dash].filter(Boolean).join(' ') }), se.name)))
      : null;
    fig.replaceChildren(h('figcaption', null, h('strong', null, title + ':'), ' ', hist.length ? words : 'no data yet.'), svg);
    if (legend) fig.append(legend);
    fig.setAttribute('data-latest', latest == null || Number.isNaN(latest) ? '' : String(latest));
  }

  // Jobs done and failed per second, from the samples' cumulative counts.
  function rate(field) {
    const out = new Map();
    hist.forEach((smp, i) => {
      const a = hist[i - 1];
      if (!a || !a.jobs || !smp.jobs || smp.t <= a.t) return;
      const diff = smp.jobs[field] - a.jobs[field];
      if (diff >= 0) out.set(smp, diff / (smp.t - a.t));
    });
    return out;
  }

  const CLASSES = [['1xx', 'k5'], ['2xx', 'k1'], ['3xx', 'k2'], ['4xx', 'k3'], ['5xx', 'k4']];

  function drawCharts(d) {
    const last = hist[hist.length - 1] || {};
    const sec = (v) => (v == null ? null : v * 1000);
    const peak = hist.reduce((m, smp) => Math.max(m, smp.requests || 0), 0);
    chart('chart-rps', 'Requests per second', [{ unit: 'requests/s', int: true, series: [{ name: 'requests/s', k: 'k1', v: (smp) => smp.requests }] }],
      `${num(last.requests ?? 0)} in the latest second, peak ${peak} in the last ${dur(hist.length ? now - hist[0].t : 0)}.`, last.requests);

    const lat = ['p50', 'p95', 'p99'];
    chart('chart-latency', 'Latency', [{ unit: 'ms', series: lat.map((q, i) => ({ name: q, k: ['k1', 'k3', 'k4'][i], dash: ['', 'd2', 'd3'][i], v: (smp) => sec(smp[q]) })) }],
      last.p99 == null ? 'no request answered in the latest second.' : 'latest second: ' + lat.map((q) => q + ' ' + ms(last[q])).join(', ') + '.',
      last.p99 == null ? null : +(last.p99 * 1000).toFixed(3));

    const cl = last.classes || {};
    const total = Object.values(cl).reduce((a, b) => a + (b || 0), 0);
    const parts = CLASSES.filter(([c]) => cl[c]).map(([c]) => cl[c] + ' ' + c);
    chart('chart-classes', 'Responses by status class', [{ unit: 'responses/s', int: true, bars: true, series: CLASSES.map(([c, k]) => ({ name: c, k, v: (smp) => (smp.classes || {})[c] })) }],
      `latest second: ${parts.join(', ') || 'none'} (total ${total}).`, last.classes ? total : null);

    chart('chart-queue', 'Requests waiting for a worker', [
      { unit: 'waiting', int: true, series: [{ name: 'waiting requests', k: 'k2', v: (smp) => smp.waiting }] },
      { unit: 'wait p95 (ms)', series: [{ name: 'wait p95', k: 'k3', v: (smp) => sec(smp.wait_p95) }] }],
      `${num(last.waiting ?? 0)} waiting at the latest sample; wait p95 ${last.wait_p95 == null ? 'none' : ms(last.wait_p95)}.`, last.waiting);

    const jobs = hist.some((smp) => smp.jobs) || (d.queues || []).length > 0;
    $('chart-jobs').hidden = !jobs;
    if (jobs) {
      const done = rate('done');
      const failed = rate('failed');
      const f = (v) => (v == null ? DASH : v.toFixed(1));
      chart('chart-jobs', 'Jobs per second', [{ unit: 'jobs/s', series: [
        { name: 'done/s', k: 'k1', v: (smp) => done.get(smp) },
        { name: 'failed/s', k: 'k4', dash: 'd2', v: (smp) => failed.get(smp) }] }],
      `latest second: ${f(done.get(last))} done/s, ${f(failed.get(last))} failed/s.`,
      done.has(last) ? +done.get(last).toFixed(2) : null);
    }
  }

  // ---- polling ---------------------------------------------------------

  // Adds the new samples (oldest first) to the local history, capped.
  function merge(samples) {
    const lt = hist.length ? hist[hist.length - 1].t : -Infinity;
    for (const smp of samples || []) if (smp && smp.t > lt) hist.push(smp);
    if (hist.length > KEEP) hist.splice(0, hist.length - KEEP);
  }

  function connection(ok) {
    const c = $('connection');
    const st = ok ? 'live' : 'lost';
    if (c.dataset.state === st) return; // unchanged text: no announcement
    c.dataset.state = st;
    c.textContent = ok ? 'live' : 'connection lost, retrying…';
  }

  function draw(d) {
    now = d.now || Date.now() / 1000;
    actionsOn = !!d.actions;
    for (const f of [drawHead, drawPool, drawRoutes, drawClassic, drawSlow, drawWork, drawCharts, locks]) {
      try {
        f(d);
      } catch (e) {
        console.error(e); // one odd section does not stop the others
      }
    }
    document.body.dataset.loaded = '1';
  }

  // Polls now, then every second (5 s while the tab is hidden); a poll
  // asked for while one is under way runs right after it.
  async function poll() {
    clearTimeout(timer);
    if (inflight) return void (again = true);
    inflight = true;
    try {
      let d = null;
      try {
        const since = hist.length ? '?since=' + hist[hist.length - 1].t : '';
        const r = await fetch('api/status' + since, { cache: 'no-store', signal: AbortSignal.timeout(5000) });
        if (!r.ok) throw new Error('HTTP ' + r.status);
        d = await r.json();
      } catch (e) {
        connection(false);
      }
      if (d) {
        connection(true);
        merge(Array.isArray(d.history) ? d.history : []);
        draw(d);
      }
    } finally {
      inflight = false;
      timer = setTimeout(poll, again ? 0 : document.hidden ? 5000 : 1000);
      again = false;
    }
  }

  // ---- actions ---------------------------------------------------------

  function say(text, kind) {
    const m = $('message');
    m.dataset.kind = kind;
    m.textContent = text;
  }

  // Shows the unlock form or the lock button and enables the action
  // buttons when a token is kept and actions are on.
  function locks() {
    const open = !!token && actionsOn;
    $('actions-off').hidden = actionsOn;
    $('unlock').hidden = open || !actionsOn;
    $('unlocked').hidden = !open;
    for (const b of document.querySelectorAll('button.act')) b.disabled = !open;
  }

  async function post(url) {
    const r = await fetch(url, { method: 'POST', headers: { Authorization: 'Bearer ' + token }, cache: 'no-store' });
    let body = {};
    try {
      body = await r.json();
    } catch (e) {
      // not JSON: the status says it
    }
    return { status: r.status, ok: r.ok && body.ok === true, text: body.message || body.error || 'HTTP ' + r.status };
  }

  function forget() {
    token = '';
    sessionStorage.removeItem(KEY);
    locks();
  }

  async function act(url, what) {
    say(what + '…', 'busy');
    try {
      const a = await post(url);
      if (a.status === 401) {
        forget();
        say(what + ' refused: the token is not accepted any more; unlock again.', 'error');
      } else say(what + (a.ok ? ': ' : ' failed: ') + a.text, a.ok ? 'ok' : 'error');
    } catch (e) {
      say(what + ' failed: ' + e.message, 'error');
    }
    poll();
  }

  $('unlock').addEventListener('submit', async (e) => {
    e.preventDefault();
    const input = $('token');
    token = input.value.trim();
    if (!token) return;
    try {
      const a = await post('api/check');
      if (a.ok) {
        sessionStorage.setItem(KEY, token);
        input.value = '';
        locks();
        $('lock').focus();
        say('Actions unlocked: ' + a.text, 'ok');
        return;
      }
      say('Unlock refused: ' + a.text, 'error');
    } catch (err) {
      say('Unlock failed: ' + err.message, 'error');
    }
    token = '';
    locks();
  });

  $('lock').addEventListener('click', () => {
    forget();
    say('Actions locked: the token is forgotten.', 'ok');
    $('token').focus();
  });

  $('reload').addEventListener('click', () => act('api/reload', 'Reload'));

  // Retry, delete and purge buttons of the queues (added as jobs come).
  $('queues').addEventListener('click', (e) => {
    const b = e.target.closest('button[data-action]');
    if (!b || b.disabled) return;
    const sec = b.closest('[data-queue]');
    const q = sec.dataset.queue;
    const a = b.dataset.action;
    if (a === 'purge') {
      const part = b.dataset.part;
      if (!confirm(`Purge every ${part} job of the queue ${sec.dataset.url}? This cannot be undone.`)) return;
      act(`api/queues/${q}/purge/${part}`, `Purge of the ${part} jobs`);
    } else {
      const id = b.closest('tr').dataset.id;
      act(`api/queues/${q}/dead/${encodeURIComponent(id)}/${a}`, (a === 'retry' ? 'Retry' : 'Delete') + ' of job ' + id);
    }
  });

  document.addEventListener('visibilitychange', () => {
    if (!document.hidden) poll();
  });

  poll();
})();
