// dubflow console: one vanilla script, no build step, no network but this
// origin. Every page is built with DOM calls, never by parsing HTML
// strings, so text from tasks and errors is always shown as text.
'use strict';
(() => {
  // ---- the API contract (services/console/API.md) ----
  const API = {
    login: '/api/login',
    logout: '/api/logout',
    session: '/api/session',
    tasks: '/api/tasks',
    uploads: '/api/uploads',
    task: (id) => `/api/tasks/${enc(id)}`,
    realtime: (id) => `/api/tasks/${enc(id)}/realtime-status`,
    taskEvents: (id) => `/api/tasks/${enc(id)}/events`,
    cancel: (id) => `/api/tasks/${enc(id)}/cancel`,
    retry: (id) => `/api/tasks/${enc(id)}/retry`,
    redub: (id) => `/api/tasks/${enc(id)}/redub`,
    segments: (id) => `/api/tasks/${enc(id)}/segments`,
    review: (id) => `/api/tasks/${enc(id)}/review`,
    reviewEdit: (id) => `/api/tasks/${enc(id)}/review/edit`,
    reviewApprove: (id) => `/api/tasks/${enc(id)}/review/approve`,
    reviewImport: (id) => `/api/tasks/${enc(id)}/review/import`,
    reviewExport: (id, format) => `/api/tasks/${enc(id)}/review/export?format=${enc(format)}`,
    reviewAudio: (id, n) => `/api/tasks/${enc(id)}/review/audio?line=${enc(n)}`,
    events: '/api/events',
    health: '/api/system/health',
    deadLetters: '/api/dead-letters',
    deadLetter: (id) => `/api/dead-letters/${enc(id)}`,
    replay: (id) => `/api/dead-letters/${enc(id)}/replay`,
    compensation: '/api/compensations',
    requeue: '/api/compensations/requeue',
    waiting: (project) => `/api/waiting/projects/${enc(project)}/status`,
    waitingProjects: '/api/waiting/projects',
    timeline: (id) => `/api/tasks/${enc(id)}/timeline`,
    versions: (id) => `/api/tasks/${enc(id)}/versions?links=true`,
    history: '/api/metrics/history',
    queues: '/api/queues',
    pause: (step) => `/api/queues/${enc(step)}/pause`,
    resume: (step) => `/api/queues/${enc(step)}/resume`,
    workers: '/api/workers',
    engines: '/api/engines',
    bulkReplay: '/api/dead-letters/replay',
    bulkPurge: '/api/dead-letters/purge',
    audit: '/api/audit',
    projects: '/api/projects',
  };
  const CSRF_HEADER = 'X-CSRF-Token';
  const STEPS = ['extract_audio', 'asr', 'translate', 'tts', 'mux_video'];
  const TASK_STATUSES = ['queued', 'running', 'compensating', 'review', 'done', 'failed', 'cancelled'];
  const ACTIVE = new Set(['queued', 'running', 'compensating', 'redubbing']);
  // A task in review waits for a person: it can be cancelled, and its page
  // is not reloaded on a timer (nothing moves it but an edit or approval).
  const CANCELLABLE = new Set([...ACTIVE, 'review']);
  const PAGE_SIZE = 25;
  // Videos larger than this go straight to the object store (a presigned
  // POST policy from POST /api/uploads), not through the console.
  const PRESIGN_ABOVE = 32 << 20;

  const enc = encodeURIComponent;
  const $ = (sel, root = document) => root.querySelector(sel);

  // h builds an element: h('td', {class: 'num'}, 'text', child, ...).
  // Attributes starting with "on" are listeners; null children are skipped.
  function h(tag, attrs, ...children) {
    const el = tag === 'svg' || SVG_TAGS.has(tag)
      ? document.createElementNS('http://www.w3.org/2000/svg', tag) : document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else if (k === 'dataset') Object.assign(el.dataset, v);
      else if (k === 'style') el.style.cssText = v; // CSSOM: allowed by the CSP, a style attribute is not
      else el.setAttribute(k, v === true ? '' : String(v));
    }
    append(el, children);
    return el;
  }
  const SVG_TAGS = new Set(['line', 'polyline', 'text', 'g', 'rect', 'title', 'path', 'circle']);
  function append(el, children) {
    for (const c of children.flat(Infinity)) {
      if (c === null || c === undefined || c === false) continue;
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
  }
  function fill(el, ...children) { el.replaceChildren(); append(el, children); return el; }

  // pick returns the first field of o that is set, under any of the names
  // (camelCase as the API writes them; snake_case as the database does).
  function pick(o, ...names) {
    if (!o) return undefined;
    for (const n of names) if (o[n] !== undefined && o[n] !== null) return o[n];
    return undefined;
  }

  // ---- formatting ----
  function shortId(id) { return id ? String(id).slice(0, 8) : '—'; }
  function when(t) {
    if (!t) return '—';
    const d = new Date(t);
    if (isNaN(d)) return String(t);
    const s = Math.round((Date.now() - d.getTime()) / 1000);
    if (s < 0) return 'in ' + dur(-s * 1000);
    if (s < 60) return s + 's ago';
    if (s < 3600) return Math.floor(s / 60) + 'm ago';
    if (s < 86400) return Math.floor(s / 3600) + 'h ago';
    return d.toISOString().slice(0, 16).replace('T', ' ');
  }
  function timeCell(t) { return h('span', {title: t ? new Date(t).toLocaleString() : ''}, when(t)); }
  function dur(ms) {
    if (ms === undefined || ms === null || isNaN(ms)) return '—';
    if (ms < 1000) return Math.round(ms) + ' ms';
    const s = ms / 1000;
    if (s < 60) return s.toFixed(s < 10 ? 2 : 1) + ' s';
    if (s < 3600) return Math.floor(s / 60) + 'm ' + Math.round(s % 60) + 's';
    return Math.floor(s / 3600) + 'h ' + Math.round((s % 3600) / 60) + 'm';
  }
  function between(a, b) {
    if (!a) return undefined;
    return (b ? new Date(b) : new Date()) - new Date(a);
  }
  function pct(x) { return x === undefined || x === null || isNaN(x) ? '—' : (x * 100).toFixed(1) + '%'; }
  function num(x, digits = 0) { return x === undefined || x === null || isNaN(x) ? '—' : Number(x).toFixed(digits); }
  function badge(status) { return h('span', {class: 'badge s-' + (status || 'unknown')}, status || 'unknown'); }
  // copyable shows text (an id, an error) wrapping at sensible places, with
  // a button that copies it whole.
  function copyable(text, cls) {
    if (!text) return h('span', {class: 'muted'}, '—');
    return h('span', {class: 'copyable ' + (cls || '')}, h('span', {class: 'ctext'}, text),
      h('button', {type: 'button', class: 'copy', title: 'Copy', 'aria-label': 'Copy', onclick: (ev) => { ev.preventDefault(); ev.stopPropagation(); copy(text); }}, 'copy'));
  }
  function copy(text) {
    const done = () => flash('Copied');
    if (navigator.clipboard && window.isSecureContext) { navigator.clipboard.writeText(text).then(done, () => copyFallback(text, done)); return; }
    copyFallback(text, done);
  }
  function copyFallback(text, done) {
    const ta = h('textarea', {style: 'position:fixed;left:-9999px;top:0', readonly: true});
    ta.value = text;
    document.body.append(ta);
    ta.select();
    try { document.execCommand('copy'); done(); } catch { flash('Select the text to copy it', true); }
    ta.remove();
  }
  // readonly reports whether the session may only read: the page then
  // shows no button that changes anything (class admin-only).
  function readonly() { return document.body.classList.contains('readonly'); }
  function bytes(n) {
    if (n < 1024) return n + ' B';
    if (n < 1 << 20) return (n / 1024).toFixed(1) + ' KiB';
    if (n < 1 << 30) return (n / (1 << 20)).toFixed(1) + ' MiB';
    return (n / (1 << 30)).toFixed(2) + ' GiB';
  }

  // ---- messages ----
  function flash(text, bad) {
    const el = h('div', {class: bad ? 'bad' : ''}, text);
    $('#flash').append(el);
    setTimeout(() => el.remove(), bad ? 8000 : 4000);
  }

  // ---- the API ----
  class APIError extends Error {
    constructor(status, message) { super(message); this.status = status; }
  }
  function csrfToken() {
    const stored = sessionStorage.getItem('dubflow.csrf');
    if (stored) return stored;
    const m = document.cookie.match(/(?:^|;\s*)dubflow_csrf=([^;]+)/);
    return m ? decodeURIComponent(m[1]) : '';
  }
  function headers(method, extra) {
    const hd = Object.assign({Accept: 'application/json'}, extra || {});
    if (method !== 'GET' && method !== 'HEAD') hd[CSRF_HEADER] = csrfToken();
    return hd;
  }
  async function api(path, {method = 'GET', body, signal} = {}) {
    const init = {method, credentials: 'same-origin', signal, headers: headers(method)};
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers['Content-Type'] = 'application/json';
    }
    const res = await fetch(path, init);
    if (res.status === 401 && location.pathname !== '/login') {
      toLogin();
      throw new APIError(401, 'not logged in');
    }
    const text = await res.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch { data = {error: text}; }
    if (!res.ok) {
      const msg = pick(data, 'message', 'error') || res.statusText;
      throw new APIError(res.status, typeof msg === 'string' ? msg : JSON.stringify(msg));
    }
    return data;
  }
  function toLogin() {
    sessionStorage.removeItem('dubflow.csrf');
    forgetSession();
    const next = location.pathname + location.search;
    go('/login' + (next && next !== '/' && next !== '/login' ? '?next=' + enc(next) : ''), true);
  }
  function listOf(data, ...names) {
    if (Array.isArray(data)) return data;
    const v = pick(data, ...names, 'items', 'data');
    return Array.isArray(v) ? v : [];
  }

  // ---- live updates ----
  // live opens an EventSource for the page; it closes with the page. The
  // indicator in the header shows whether it is connected.
  function live(ctx, url, onEvent) {
    const es = new EventSource(url, {withCredentials: true});
    const ind = $('#live');
    const set = (on) => { ind.classList.toggle('on', on); ind.lastElementChild.textContent = on ? 'live' : 'reconnecting'; };
    es.onopen = () => set(true);
    es.onerror = () => set(false);
    const handle = (ev) => {
      let data = null;
      try { data = JSON.parse(ev.data); } catch { return; }
      onEvent(data, ev.type);
    };
    es.onmessage = handle;
    // A reconnect sends Last-Event-ID and gets what it missed; reset means
    // too much was missed: the page reloads its data instead.
    for (const t of ['task', 'step', 'reset']) es.addEventListener(t, handle);
    ind.hidden = false;
    ind.lastElementChild.textContent = 'connecting';
    ctx.cleanup(() => { es.close(); ind.classList.remove('on'); ind.hidden = true; });
    return es;
  }
  // every calls fn now and then every ms until the page closes; a call
  // never overlaps the previous one.
  function every(ctx, ms, fn) {
    let timer = null;
    const tick = async () => {
      try { await fn(); } catch (e) { if (!ctx.closed) report(e); }
      if (!ctx.closed) timer = setTimeout(tick, ms);
    };
    ctx.cleanup(() => clearTimeout(timer));
    tick();
  }
  function debounce(ms, fn) {
    let t = null;
    return () => { clearTimeout(t); t = setTimeout(fn, ms); };
  }
  function report(e) {
    if (e && e.name === 'AbortError') return;
    if (e && e.status === 401) return;
    flash(e && e.message ? e.message : String(e), true);
  }

  // ---- the session: who is logged in, and whether read-only ----
  let sessionP = null;
  function session() {
    if (!sessionP) {
      sessionP = api(API.session).then((s) => {
        const role = pick(s, 'role');
        const ro = role !== 'admin' && role !== 'operator';
        const project = pick(s, 'project') || '';
        document.body.classList.toggle('readonly', ro);
        // A project's token sees its project only: no switcher, none of
        // the installation's pages (they answer it 403).
        document.body.classList.toggle('project-token', !!project);
        $('#who').textContent = (pick(s, 'name') || '') + (project ? ' · project ' + project : '') + (ro ? ' · read-only' : '');
        showProjectSwitch(project).catch(report);
        return s;
      }).catch((e) => { sessionP = null; throw e; });
    }
    return sessionP;
  }
  function forgetSession() {
    sessionP = null;
    document.body.classList.remove('readonly', 'project-token');
    $('#who').textContent = '';
    $('#project-switch').hidden = true;
  }

  // ---- the project switcher (admins across every project) ----
  // The project chosen narrows the task list (?project=) and is the
  // project of the videos uploaded; "" is every project (uploads: the
  // default project). A project's token has no switcher.
  function chosenProject() {
    if (document.body.classList.contains('project-token')) return '';
    return localStorage.getItem('dubflow.project') || '';
  }
  async function showProjectSwitch(own) {
    const sel = $('#project-switch');
    sel.hidden = !!own;
    if (own) return;
    const projects = listOf(await api(API.projects), 'projects');
    const chosen = chosenProject();
    fill(sel, h('option', {value: ''}, 'All projects'),
      projects.map((p) => h('option', {value: pick(p, 'id'), selected: pick(p, 'id') === chosen}, pick(p, 'name') || pick(p, 'id'))));
    sel.value = projects.some((p) => pick(p, 'id') === chosen) ? chosen : '';
    sel.onchange = () => { localStorage.setItem('dubflow.project', sel.value); render(); };
  }

  // ---- the router ----
  const routes = [];
  function route(re, section, page) { routes.push({re, section, page}); }
  let current = null;
  function go(path, replace) {
    if (replace) history.replaceState(null, '', path); else history.pushState(null, '', path);
    render();
  }
  function render() {
    if (current) current.close();
    const path = location.pathname.replace(/\/+$/, '') || '/';
    const r = routes.find((x) => x.re.test(path)) || routes.find((x) => x.section === 'tasks');
    const m = path.match(r.re) || [];
    const ctx = newContext();
    current = ctx;
    document.body.classList.toggle('anon', r.section === 'login');
    for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('on', a.dataset.section === r.section);
    const main = fill($('#app'));
    Promise.resolve(r.section === 'login' ? null : session()).then(() => {
      if (!ctx.closed) return r.page(main, ctx, ...m.slice(1).map(decodeURIComponent));
    }).catch((e) => {
      if (ctx.closed) return;
      report(e);
      if (e.status !== 401) fill(main, h('div', {class: 'panel'}, h('h1', {}, 'Could not load this page'), h('p', {class: 'muted'}, e.message)));
    });
  }
  function newContext() {
    const fns = [];
    const ab = new AbortController();
    const ctx = {
      closed: false, signal: ab.signal,
      cleanup: (fn) => fns.push(fn),
      close: () => { ctx.closed = true; ab.abort(); for (const fn of fns) fn(); },
    };
    return ctx;
  }
  document.addEventListener('click', (ev) => {
    const a = ev.target.closest('a[data-nav], a[href^="/"]');
    if (!a || ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || a.target) return;
    const url = new URL(a.href, location.href);
    if (url.origin !== location.origin || url.pathname.startsWith('/api/') || url.pathname.startsWith('/static/')) return;
    ev.preventDefault();
    go(url.pathname + url.search);
  });
  window.addEventListener('popstate', render);

  // ---- buttons that call the API ----
  // action returns a click handler that disables the button while the
  // request runs and reports the outcome.
  function action(fn, done) {
    return async (ev) => {
      const b = ev.currentTarget;
      b.disabled = true;
      try {
        const out = await fn();
        if (done) done(out);
      } catch (e) {
        report(e);
      } finally {
        b.disabled = false;
      }
    };
  }

  window.__dubflow = {api, API, go}; // for the browser tests and the curious
  // ---- login ----
  function pageLogin(main) {
    const input = h('input', {type: 'password', id: 'token', name: 'token', autocomplete: 'current-password',
      placeholder: 'DUBFLOW_API_TOKEN', required: true, autofocus: true});
    const err = h('p', {class: 'reasons', id: 'login-error'});
    const form = h('form', {class: 'panel login', id: 'login-form'},
      h('h1', {}, 'Log in'),
      h('p', {class: 'muted'}, 'Paste an API token (DUBFLOW_API_TOKEN, or the read-only token). It is exchanged for a session cookie and not stored by the page.'),
      h('label', {for: 'token'}, 'Token'), input, err,
      h('div', {class: 'row'}, h('span', {class: 'spacer'}), h('button', {class: 'primary', type: 'submit', id: 'login'}, 'Log in')));
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      err.textContent = '';
      try {
        const out = await api(API.login, {method: 'POST', body: {token: input.value.trim()}});
        const csrf = pick(out, 'csrfToken');
        if (csrf) sessionStorage.setItem('dubflow.csrf', csrf);
        forgetSession();
        const next = new URLSearchParams(location.search).get('next');
        go(next && next.startsWith('/') && !next.startsWith('//') ? next : '/tasks', true);
      } catch (e) {
        err.textContent = e.status === 401 || e.status === 403 ? 'That token is not valid.' : e.message;
      }
    });
    fill(main, form);
  }

  // ---- tasks ----
  // The list follows the URL (?status=&cursor=), so back, reload and links
  // keep the view; live events update rows in place.
  // The search (?q=&language=&error=&since=) combines with the status.
  const SEARCH_FIELDS = ['q', 'language', 'error', 'since'];
  function tasksURL(params, change) {
    const p = new URLSearchParams();
    for (const k of ['status', ...SEARCH_FIELDS, 'cursor']) {
      const v = k in change ? change[k] : params.get(k);
      if (v) p.set(k, v);
    }
    const qs = p.toString();
    return '/tasks' + (qs ? '?' + qs : '');
  }
  function searchForm(q) {
    const field = (name, attrs) => h('input', Object.assign({id: 'search-' + name, name, value: q.get(name) || ''}, attrs));
    const since = h('select', {id: 'search-since', name: 'since', 'aria-label': 'created within'},
      [['', 'any time'], ['1h', 'last hour'], ['24h', 'last 24 h'], ['7d', 'last 7 days'], ['30d', 'last 30 days']]
        .map(([v, label]) => h('option', {value: v, selected: v === (q.get('since') || '')}, label)));
    const form = h('form', {class: 'row search', id: 'task-search', role: 'search'},
      field('q', {type: 'search', placeholder: 'Search: task id prefix or file name', 'aria-label': 'task id prefix or file name', style: 'width:260px'}),
      field('language', {type: 'text', placeholder: 'language', 'aria-label': 'language', size: 7}),
      field('error', {type: 'text', placeholder: 'error text', 'aria-label': 'error text', style: 'width:200px'}),
      since, h('button', {type: 'submit', id: 'search-go'}, 'Search'),
      SEARCH_FIELDS.some((k) => q.get(k)) ? h('a', {href: tasksURL(q, {q: '', language: '', error: '', since: '', cursor: ''}), id: 'search-clear'}, 'clear') : null);
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const change = {cursor: ''};
      for (const k of SEARCH_FIELDS) change[k] = form.elements[k].value.trim();
      go(tasksURL(q, change));
    });
    return form;
  }
  async function pageTasks(main, ctx) {
    const q = new URLSearchParams(location.search);
    const status = q.get('status') || '';
    const cursor = q.get('cursor') || '';
    const searching = SEARCH_FIELDS.some((k) => q.get(k));
    const filters = h('div', {class: 'filters', role: 'group', 'aria-label': 'Status'},
      ['', ...TASK_STATUSES].map((s) => h('button', {type: 'button', class: s === status ? 'on' : '', dataset: {status: s},
        onclick: () => go(tasksURL(q, {status: s, cursor: ''}))}, s || 'all')));
    const tbody = h('tbody', {id: 'tasks-body'});
    const table = h('table', {id: 'tasks'},
      h('colgroup', {}, h('col', {style: 'width:180px'}), h('col', {style: 'width:130px'}), h('col', {style: 'width:120px'}),
        h('col', {style: 'width:120px'}), h('col', {style: 'width:110px'}), h('col', {style: 'width:110px'}), h('col', {})),
      h('thead', {}, h('tr', {}, ['Task', 'Status', 'Languages', 'Speaker', 'Created', 'Updated', 'Error'].map((c) => h('th', {}, c)))),
      tbody);
    const pager = h('div', {class: 'pager'});
    fill(main, h('div', {class: 'row', style: 'margin-bottom:12px'}, h('h1', {style: 'margin:0'}, 'Tasks'), filters,
      h('span', {class: 'spacer'}), h('a', {href: '/upload', class: 'btn admin-only'}, 'Upload a video')),
    searchForm(q), h('div', {class: 'tablebox'}, table), pager);
    tbody.append(h('tr', {class: 'empty'}, h('td', {colspan: 7}, 'Loading…')));

    const load = async () => {
      const params = new URLSearchParams({limit: PAGE_SIZE});
      for (const k of ['status', ...SEARCH_FIELDS, 'cursor']) if (q.get(k)) params.set(k, q.get(k));
      if (chosenProject()) params.set('project', chosenProject());
      const data = await api(API.tasks + '?' + params, {signal: ctx.signal});
      const tasks = listOf(data, 'tasks');
      fill(tbody, tasks.length ? tasks.map(taskRow)
        : h('tr', {class: 'empty'}, h('td', {colspan: 7}, searching ? 'No task matches this search.'
          : status ? `No ${status} tasks.` : 'No tasks yet. Upload a video to start one.')));
      renderPager(pager, q, cursor, pick(data, 'nextCursor', 'next_cursor'));
    };
    await load();
    const reload = debounce(400, () => load().catch(report));
    live(ctx, API.events, (ev, type) => {
      if (type === 'reset') { reload(); return; }
      if (type !== 'task') return; // step events change no column of the list
      const id = pick(ev, 'taskId');
      const row = id && tbody.querySelector(`tr[data-id="${CSS.escape(id)}"]`);
      const st = pick(ev, 'status');
      if (row && st) {
        if ((status && st !== status) || searching) { reload(); return; }
        fill(row.children[1], badge(st));
        fill(row.children[5], timeCell(pick(ev, 'updatedAt') || new Date().toISOString()));
        fill(row.children[6], h('div', {class: 'clamp'}, pick(ev, 'error') || ''));
        row.children[6].title = row.children[6].textContent;
      } else if (!row && !cursor && !searching) {
        reload();
      }
    });
    every(ctx, 30000, async () => {
      for (const c of tbody.querySelectorAll('td[data-time]')) fill(c, timeCell(c.dataset.time));
    });
  }
  function taskRow(t) {
    const id = pick(t, 'id', 'taskId', 'task_id');
    const err = pick(t, 'error') || '';
    const cell = (v) => h('td', {'data-time': v || ''}, timeCell(v));
    return h('tr', {'data-id': id, 'data-status': pick(t, 'status')},
      h('td', {}, h('a', {href: '/tasks/' + enc(id), title: id, class: 'mono'}, shortId(id)),
        fileName(t) ? h('div', {class: 'muted small clamp file-name', title: fileName(t)}, fileName(t)) : null),
      h('td', {}, badge(pick(t, 'status')), reviewNote(t)),
      h('td', {}, `${pick(t, 'sourceLanguage', 'source_language') || '?'} → ${targetsOf(t)}`),
      h('td', {}, pick(t, 'speaker', 'speakerId', 'speaker_id') || '—'),
      cell(pick(t, 'createdAt', 'created_at')),
      cell(pick(t, 'updatedAt', 'updated_at')),
      h('td', {title: err, class: 'muted wrap'}, h('div', {class: 'clamp'}, err)));
  }
  // reviewNote says, for a task waiting in review, what for and how long.
  function reviewNote(t) {
    const since = pick(t, 'reviewSince');
    if (pick(t, 'status') !== 'review' || !since) return null;
    return h('div', {class: 'muted small review-note'}, `${pick(t, 'reviewStage')} · waiting ${dur(between(since))}`);
  }
  // fileName is the name the task's video was uploaded as ('' unknown).
  function fileName(t) { return pick(t, 'fileName', 'file_name') || ''; }
  // targetsOf is a task's target language, or a parent's languages.
  function targetsOf(t) {
    const several = pick(t, 'targetLanguages');
    if (Array.isArray(several) && several.length) return several.join(', ');
    return pick(t, 'targetLanguage', 'target_language') || '?';
  }
  function renderPager(pager, q, cursor, next) {
    fill(pager,
      h('button', {type: 'button', id: 'first-page', disabled: !cursor, onclick: () => go(tasksURL(q, {cursor: ''}))}, '« Newest'),
      h('button', {type: 'button', id: 'older', disabled: !next, onclick: () => go(tasksURL(q, {cursor: next}))}, 'Older »'));
  }
  // ---- task detail ----
  // The page is laid out once with reserved boxes; refreshes replace the
  // contents of the boxes. A player keeps its first presigned link (a new
  // signature on every refresh must not restart playback).
  async function pageTask(main, ctx, id) {
    const el = {
      status: h('span', {id: 'task-status'}, badge('…')),
      cancel: h('button', {type: 'button', id: 'cancel', class: 'danger admin-only', disabled: true}, 'Cancel'),
      retry: h('button', {type: 'button', id: 'retry', class: 'admin-only', disabled: true}, 'Retry'),
      // Another voice for the retry (optional): one the tts workers announced.
      speaker: h('input', {type: 'text', id: 'retry-speaker', class: 'admin-only', disabled: true, size: 14, maxlength: 64,
        placeholder: 'another voice', title: 'retry with another voice, such as es+f3 (empty: the task\'s own)'}),
      progress: h('div', {class: 'panel', id: 'progress'}),
      languages: h('div', {class: 'panel', id: 'languages', hidden: true}),
      source: h('div', {class: 'player', id: 'source-player'}, 'no source yet'),
      dub: h('div', {class: 'player', id: 'dub-player'}, 'the dub appears here when the task is done'),
      links: h('div', {class: 'row', id: 'links', style: 'min-height:24px;margin-top:8px'}),
      info: h('dl', {class: 'kv', id: 'info'}),
      timeline: h('ul', {class: 'timeline', id: 'timeline'}),
      timing: h('div', {id: 'timing'}),
      segments: h('div', {id: 'segments'}),
      dead: h('div', {id: 'task-dlq'}),
      review: h('div', {class: 'panel review', id: 'review', hidden: true}),
    };
    const tabs = {
      overview: h('div', {id: 'tab-overview'}),
      timeline: h('div', {id: 'tab-timeline', hidden: true}, h('div', {class: 'panel'}, h('h2', {}, 'Timeline'), h('div', {id: 'events'}, 'Loading…'))),
      versions: h('div', {id: 'tab-versions', hidden: true}, h('div', {class: 'panel'}, h('h2', {}, 'Versions of the dub'), h('div', {id: 'versions'}, 'Loading…'))),
    };
    const tabBar = h('div', {class: 'tabs', role: 'tablist'}, Object.keys(tabs).map((k) =>
      h('button', {type: 'button', role: 'tab', id: 'tabbtn-' + k, dataset: {tab: k}, onclick: () => { location.hash = k === 'overview' ? '' : k; showTab(); }},
        k[0].toUpperCase() + k.slice(1))));
    const showTab = () => {
      const want = tabs[location.hash.slice(1)] ? location.hash.slice(1) : 'overview';
      for (const [k, box] of Object.entries(tabs)) box.hidden = k !== want;
      for (const b of tabBar.children) b.classList.toggle('on', b.dataset.tab === want);
      if (want !== 'overview') loadTab(want).catch(report);
    };
    const loadTab = async (k) => {
      if (k === 'timeline') showEvents($('#events', tabs.timeline), await api(API.timeline(id), {signal: ctx.signal}));
      if (k === 'versions') showVersions($('#versions', tabs.versions), await api(API.versions(id), {signal: ctx.signal}));
    };
    window.addEventListener('hashchange', showTab);
    ctx.cleanup(() => window.removeEventListener('hashchange', showTab));
    fill(main,
      h('div', {class: 'row', style: 'margin-bottom:12px'},
        h('a', {href: '/tasks'}, '← Tasks'), h('h1', {style: 'margin:0'}, 'Task ', copyable(id, 'mono')), el.status,
        h('span', {class: 'spacer'}), el.speaker, el.retry, el.cancel),
      tabBar, tabs.overview, tabs.timeline, tabs.versions);
    fill(tabs.overview,
      el.progress,
      el.review,
      el.languages,
      h('div', {class: 'grid2'},
        h('div', {class: 'panel'}, h('h2', {}, 'Source'), el.source),
        h('div', {class: 'panel'}, h('h2', {}, 'Dub'), el.dub, el.links)),
      h('div', {class: 'grid2'},
        h('div', {class: 'panel'}, h('h2', {}, 'Task'), el.info),
        h('div', {class: 'panel'}, h('h2', {}, 'Steps'), el.timeline)),
      h('div', {class: 'panel'}, h('h2', {}, 'Timing report'), el.timing),
      h('div', {class: 'panel'}, h('h2', {}, 'Dead letters of this task'), el.dead),
      h('div', {class: 'panel'}, h('h2', {}, 'Segments and redub'), el.segments));

    let family = null; // the languages of a parent, or a child's parent
    const load = async () => {
      const [d, rt, lines] = await Promise.all([
        api(API.task(id), {signal: ctx.signal}),
        api(API.realtime(id), {signal: ctx.signal}).catch((e) => { if (e.status === 404) return null; throw e; }),
        api(API.segments(id), {signal: ctx.signal}),
      ]);
      family = pick(d, 'languages') || null;
      showTask(el, id, d, rt, listOf(lines, 'segments'), load);
      const inReview = pick(pick(d, 'task') || d, 'status') === 'review';
      el.review.hidden = !inReview;
      if (inReview) showReview(el.review, id, await api(API.review(id), {signal: ctx.signal}), load, false);
    };
    el.cancel.addEventListener('click', action(() => api(API.cancel(id), {method: 'POST', body: {reason: 'cancelled from the console'}}), () => { flash('Cancelled'); load().catch(report); }));
    el.retry.addEventListener('click', action(() => {
      const speaker = el.speaker.value.trim();
      return api(API.retry(id), {method: 'POST', body: speaker ? {speaker} : {}});
    }, (r) => {
      const voice = pick(r, 'speaker');
      el.speaker.value = '';
      flash(voice ? `Retrying with the voice ${voice}` : 'Retrying');
      load().catch(report);
    }));
    await load();
    showTab();
    const reload = debounce(300, () => {
      load().catch(report);
      const open = location.hash.slice(1);
      if (tabs[open] && open !== 'overview') loadTab(open).catch(report);
    });
    live(ctx, API.taskEvents(id), reload);
    // A parent follows its children too: their changes, and a child that
    // starts (where the transcription ends).
    const targets = listOf(family, 'targetLanguages');
    if (targets.length) {
      live(ctx, API.events, (ev, type) => {
        if (type === 'reset') { reload(); return; }
        if (type !== 'task') return;
        const kids = listOf(family, 'children');
        if (kids.length < targets.length || kids.some((c) => pick(c, 'taskId') === pick(ev, 'taskId'))) reload();
      });
    }
    // Progress figures (ETA, last activity) age even without events.
    every(ctx, 10000, async () => { if (ACTIVE.has(el.status.textContent)) await load(); });
  }
  function showTask(el, id, d, rt, lines, reload) {
    const t = pick(d, 'task') || d;
    const status = pick(t, 'status');
    fill(el.status, badge(status));
    el.cancel.disabled = !CANCELLABLE.has(status);
    el.retry.disabled = status !== 'failed' && status !== 'cancelled' && status !== 'compensating';
    el.speaker.disabled = el.retry.disabled;
    showProgress(el.progress, rt, status);
    showLanguages(el.languages, pick(d, 'languages'));
    if (listOf(pick(d, 'languages'), 'targetLanguages').length && !el.dub.querySelector('video')) {
      el.dub.textContent = 'one dub per language: see Languages above';
    }
    showInfo(el.info, t);
    showTimeline(el.timeline, d);
    const links = pick(d, 'links', 'urls') || {};
    setPlayer(el.source, 'source-video', pick(links, 'source'));
    const output = pick(links, 'output', 'dub');
    if (!output) setStreamPlayer(el.dub, pick(d, 'stream'));
    setPlayer(el.dub, 'dub-video', output);
    showLinks(el.links, links);
    showTiming(el.timing, pick(d, 'timingReport', 'timing_report', 'timing'));
    const parent = listOf(pick(d, 'languages'), 'targetLanguages').length > 0;
    showSegments(el.segments, id, pick(d, 'segments'), lines, status, parent, reload);
    showTaskDeadLetters(el.dead, pick(d, 'deadLetters'), reload);
  }
  // showLanguages shows a parent's child tasks, one per language, or a
  // child's parent; nothing for a task of one language.
  function showLanguages(box, fam) {
    if (!fam) { box.hidden = true; return; }
    box.hidden = false;
    const parent = pick(fam, 'parentTaskId');
    if (parent) {
      fill(box, h('div', {class: 'row'}, h('h2', {style: 'margin:0'}, 'Languages'),
        h('span', {id: 'parent-task'}, 'One language of task ',
          h('a', {class: 'mono', href: '/tasks/' + enc(parent), title: parent}, shortId(parent)),
          ' (extract_audio and asr ran there).')));
      return;
    }
    const targets = listOf(fam, 'targetLanguages');
    const kids = listOf(fam, 'children');
    const byLang = new Map(kids.map((c) => [pick(c, 'targetLanguage'), c]));
    const rows = targets.map((lang) => {
      const c = byLang.get(lang);
      if (!c) {
        return h('tr', {'data-lang': lang}, h('td', {}, lang), h('td', {class: 'muted'}, '—'),
          h('td', {}, h('span', {class: 'muted'}, 'starts after asr')), h('td', {class: 'muted'}, '—'), h('td', {}, ''));
      }
      const cid = pick(c, 'taskId');
      const links = pick(c, 'links') || {};
      const dl = [];
      if (pick(links, 'output')) dl.push(h('a', {href: pick(links, 'output'), target: '_blank', rel: 'noopener', class: 'child-dub'}, 'dub'));
      for (const sub of listOf(links, 'subtitles')) {
        dl.push(' · ', h('a', {href: sub.url, target: '_blank', rel: 'noopener'}, 'subtitles' + (sub.language ? ` (${sub.language}${sub.format ? ', ' + sub.format : ''})` : '')));
      }
      if (pick(links, 'burned')) dl.push(' · ', h('a', {href: pick(links, 'burned'), target: '_blank', rel: 'noopener'}, 'burned in'));
      const err = pick(c, 'error') || '';
      return h('tr', {'data-lang': lang, 'data-id': cid, 'data-status': pick(c, 'status')},
        h('td', {}, lang),
        h('td', {class: 'mono'}, h('a', {href: '/tasks/' + enc(cid), title: cid}, shortId(cid))),
        h('td', {}, badge(pick(c, 'status'))),
        h('td', {}, dl.length ? dl : h('span', {class: 'muted'}, '—')),
        h('td', {title: err, class: 'muted'}, err));
    });
    fill(box,
      h('div', {class: 'row', style: 'margin-bottom:8px'}, h('h2', {style: 'margin:0'}, 'Languages'),
        h('span', {class: 'muted'}, `transcribed once; one child task per language (${kids.length} of ${targets.length} started)`)),
      h('div', {class: 'tablebox'}, h('table', {id: 'children-table'},
        h('colgroup', {}, h('col', {style: 'width:90px'}), h('col', {style: 'width:110px'}), h('col', {style: 'width:130px'}),
          h('col', {style: 'width:420px'}), h('col', {})),
        h('thead', {}, h('tr', {}, ['Language', 'Task', 'Status', 'Outputs', 'Error'].map((c) => h('th', {}, c)))),
        h('tbody', {}, rows))));
  }
  function showProgress(box, rt, status) {
    const p = pick(rt, 'progress') || {};
    const m = pick(rt, 'metrics') || {};
    const total = p.total || 0;
    const done = p.done || 0;
    const share = total ? done / total : (status === 'done' ? 1 : 0);
    const eta = pick(m, 'estimatedCompletion');
    fill(box,
      h('div', {class: 'row', style: 'margin-bottom:8px'},
        h('h2', {style: 'margin:0'}, 'Progress'),
        h('span', {class: 'num', id: 'progress-text'}, `${done} / ${total} units done`),
        h('span', {class: 'muted'}, `pending ${p.pending ?? '—'} · failed ${p.failed ?? '—'}`),
        h('span', {class: 'spacer'}),
        h('span', {class: 'muted'}, 'throughput ', num(pick(m, 'throughput'), 2), '/min · avg wait ',
          dur((pick(m, 'avgWaitTime') ?? NaN) * 1000), ' · ETA ', ACTIVE.has(status) && eta ? when(eta) : '—',
          ' · last activity ', when(pick(rt, 'lastActivity')))),
      h('div', {class: 'bar big'}, h('i', {style: `width:${(share * 100).toFixed(1)}%`})));
  }
  function showInfo(dl, t) {
    const rows = [
      ['Task ID', copyable(pick(t, 'id', 'taskId', 'task_id'), 'mono')],
      ['Project', h('span', {id: 'task-project'}, pick(t, 'project') || '—')],
      ['File', fileName(t) ? h('span', {class: 'wrap', id: 'task-file-name'}, fileName(t)) : '—'],
      ['Languages', `${pick(t, 'sourceLanguage', 'source_language') || '?'} → ${targetsOf(t)}`],
      ['Speaker', pick(t, 'speaker', 'speakerId', 'speaker_id') || '—'],
      ['Trace ID', copyable(pick(t, 'traceId', 'trace_id'), 'mono')],
      ['Created', timeCell(pick(t, 'createdAt', 'created_at'))],
      ['Updated', timeCell(pick(t, 'updatedAt', 'updated_at'))],
      ['Source key', h('span', {class: 'mono'}, pick(t, 'sourceVideoKey', 'source_video_key') || '—')],
      ['Output key', h('span', {class: 'mono'}, pick(t, 'outputVideoKey', 'output_video_key') || '—')],
    ];
    const w = pick(t, 'waiting');
    if (w) {
      const why = {project_quota: "the project used its minutes on the shared engines today", no_quota: 'every engine spent its quota',
        rate_limit: 'every engine is rate limited', no_engine: 'no engine can serve'}[pick(w, 'reason')] || pick(w, 'reason');
      rows.push(['Waiting', h('span', {id: 'task-waiting', class: 'wrap'}, `${pick(w, 'step')}: ${pick(w, 'reason')} (${why}) until `,
        timeCell(pick(w, 'until'))), 'wrap']);
    }
    const err = pick(t, 'error');
    fill(dl, rows.map(([k, v, cls]) => [h('dt', {}, k), h('dd', cls ? {class: cls} : {}, v)]),
      h('dt', {}, 'Error'), h('dd', {class: err ? 'wrap bad' : 'muted', id: 'task-error'}, err ? copyable(err) : '—'));
  }
  // stepsOf returns [{step, status, parts: [{part, attempts: [...]}]}] from
  // either nested steps or a flat list of attempts.
  function stepsOf(d) {
    const steps = pick(d, 'steps') || [];
    if (steps.length && steps.some((s) => Array.isArray(s.parts))) return steps;
    const byStep = new Map();
    for (const s of steps) byStep.set(s.step, {step: s.step, status: s.status, parts: new Map()});
    for (const a of pick(d, 'attempts') || []) {
      if (!byStep.has(a.step)) byStep.set(a.step, {step: a.step, parts: new Map()});
      const parts = byStep.get(a.step).parts;
      const key = a.part || '';
      if (!parts.has(key)) parts.set(key, {part: key, attempts: []});
      parts.get(key).attempts.push(a);
    }
    return [...byStep.values()].map((s) => ({...s, parts: [...s.parts.values()]}));
  }
  function showTimeline(ul, d) {
    const steps = stepsOf(d);
    const names = [...STEPS, ...steps.map((s) => s.step).filter((n) => !STEPS.includes(n))];
    fill(ul, names.map((name) => {
      const s = steps.find((x) => x.step === name) || {parts: []};
      const parts = s.parts || [];
      return h('li', {'data-step': name},
        h('div', {}, h('strong', {}, name), h('br'), badge(s.status || (parts.length ? 'running' : 'pending'))),
        h('div', {class: 'attempts'}, parts.length ? parts.map(partRows)
          : h('span', {class: 'muted'}, s.status === 'skipped' ? 'skipped: the task starts from subtitles' : 'not started')));
    }));
  }
  function partRows(p) {
    const attempts = pick(p, 'attempts') || [];
    const label = p.part ? h('div', {class: 'muted mono'}, 'part ' + p.part) : null;
    return [label, attempts.map((a) => {
      const ms = pick(a, 'durationMs', 'duration_ms') ?? between(pick(a, 'startedAt', 'started_at'), pick(a, 'finishedAt', 'finished_at'));
      return h('div', {class: 'attempt'},
        badge(a.status), h('span', {class: 'num'}, '#' + a.attempt), h('span', {class: 'muted', title: a.worker || ''}, a.worker || '—'),
        h('span', {class: 'num'}, dur(ms)), a.error ? h('div', {class: 'err'}, copyable(a.error)) : null);
    })];
  }
  function setPlayer(box, elId, url) {
    if (!url) return;
    const v = box.querySelector('video');
    // The growing stream gives way to the finished video unless it is
    // being watched (it ends by itself, with the same dub).
    if (v && v.dataset.loaded && !(v.dataset.stream && (v.paused || v.ended))) return;
    if (v && v._hls) v._hls.destroy();
    fill(box, h('video', {id: elId, controls: true, preload: 'metadata', src: url, 'data-loaded': '1'}));
  }
  // setStreamPlayer plays a long task's growing stream (HLS: issue 53)
  // while the task runs: with hls.js (vendored, loaded on first use) where
  // the browser has Media Source Extensions, else with the browser's own
  // HLS (Safari).
  function setStreamPlayer(box, st) {
    const url = pick(st || {}, 'url');
    const secs = Math.floor(pick(st || {}, 'playableSeconds') || 0);
    const note = box.querySelector('#stream-note');
    if (note) note.textContent = streamNote(secs, pick(st, 'ended'));
    if (!url || secs <= 0 || box.querySelector('video')) return;
    const v = h('video', {id: 'stream-video', controls: true, preload: 'metadata', 'data-loaded': '1', 'data-stream': '1'});
    fill(box, v, h('p', {class: 'muted', id: 'stream-note'}, streamNote(secs, pick(st, 'ended'))));
    loadScript('/static/vendor/hls.min.js').catch(() => null).then(() => {
      if (window.Hls && window.Hls.isSupported()) {
        const hls = new window.Hls({enableWorker: false});
        hls.loadSource(url);
        hls.attachMedia(v);
        v._hls = hls;
      } else if (v.canPlayType('application/vnd.apple.mpegurl')) {
        v.src = url;
      } else {
        fill(box, h('span', {class: 'muted'}, 'This browser cannot play the dub while it is made; it appears here when it is done.'));
      }
    });
  }
  function streamNote(secs, ended) {
    return ended ? `The dub streams whole (${secs} s).`
      : `The dub plays while it is made: ${secs} s so far, more as each stretch is dubbed.`;
  }
  const scripts = new Map();
  function loadScript(src) {
    if (!scripts.has(src)) {
      scripts.set(src, new Promise((resolve, reject) => {
        const el = h('script', {src});
        el.onload = resolve;
        el.onerror = () => reject(new Error('cannot load ' + src));
        document.head.appendChild(el);
      }));
    }
    return scripts.get(src);
  }
  function showLinks(box, links) {
    const items = [];
    const add = (label, url) => { if (url) items.push(h('a', {href: url, target: '_blank', rel: 'noopener'}, label)); };
    add('Download the dub', pick(links, 'output', 'dub'));
    add('The dub with subtitles burned in', pick(links, 'burned'));
    add('Dub audio', pick(links, 'dubAudio'));
    add('Download the source', pick(links, 'source'));
    const subs = pick(links, 'subtitles', 'subs');
    const fmt = (s) => (s.format === 'vtt' ? ', WebVTT' : s.format === 'srt' ? ', SRT' : '');
    if (Array.isArray(subs)) subs.forEach((s, i) => add('Subtitles' + (s.language ? ` (${s.language}${fmt(s)})` : subs.length > 1 ? ` ${i + 1}` : ''), s.url || s));
    else if (subs && typeof subs === 'object') for (const [k, u] of Object.entries(subs)) add(`Subtitles (${k})`, u);
    else add('Subtitles', subs);
    add('Timing report (JSON)', pick(links, 'timingReport', 'timing'));
    fill(box, items.length ? items : h('span', {class: 'muted'}, 'Links appear as the steps produce them.'));
  }
  function showTiming(box, report) {
    const raw = report && pick(report, 'segments');
    if (!Array.isArray(raw) || !raw.length) { fill(box, h('p', {class: 'muted'}, 'No timing report yet (written by mux_video).')); return; }
    // Segments are numbered from 1 (n); a report written before n existed has idx only.
    const segs = raw.map((s) => (s.n === undefined && typeof s.idx === 'number' ? {...s, n: s.idx + 1} : s));
    const cols = ['n', 'start_ms', 'slot_ms', 'audio_ms', 'tempo', 'out_ms', 'pad_ms', 'borrowed_ms', 'truncated_ms', 'note']
      .filter((c) => segs.some((s) => s[c] !== undefined));
    const sum = pick(report, 'summary') || {};
    fill(box,
      h('p', {class: 'muted'}, Object.entries(sum).map(([k, v]) => `${k.replace(/_/g, ' ')} ${v}`).join(' · '),
        report.max_speedup ? ` · max speed-up ${report.max_speedup}×` : ''),
      h('div', {class: 'tablebox', style: 'max-height:320px;overflow:auto'}, h('table', {id: 'timing-table'},
        h('thead', {}, h('tr', {}, cols.map((c) => h('th', {class: c === 'note' ? '' : 'num'}, c.replace(/_ms$/, ' ms').replace(/_/g, ' '))))),
        h('tbody', {}, segs.map((s) => h('tr', {}, cols.map((c) => h('td', {class: c === 'note' ? 'wrap' : 'num'}, s[c] ?? ''))))))));
  }
  // showSegments lists the lines of the dub (GET /api/tasks/{id}/segments)
  // with their translation in an input: edit one and press Redub to dub
  // only that line again (POST /api/tasks/{id}/redub) as a new version. A
  // parent's lines are shown as transcribed, without edits: each language
  // is re-dubbed in its own child task.
  function showSegments(box, id, counts, lines, status, parent, reload) {
    if (box.contains(document.activeElement)) return; // keep an edit in progress
    const c = counts || {};
    const done = status === 'done';
    const hint = parent ? 'to change a line, open the task of its language (Languages above) and redub it there.'
      : done ? 'edit a translation and press Redub to dub that line again.' : 'lines can be redubbed once the task is done.';
    const summary = h('p', {class: 'muted', id: 'segments-hint'}, `${c.total ?? lines.length} segments · ${c.translated ?? '—'} translated · ${c.synthesized ?? '—'} synthesized · ${c.failedTts ?? '—'} failed synthesis · ` + hint);
    if (!lines.length) { fill(box, summary, h('p', {class: 'muted', id: 'segments-empty'}, 'No segments yet.')); return; }
    if (parent) {
      fill(box, summary, h('div', {class: 'tablebox', style: 'max-height:480px;overflow:auto'}, h('table', {id: 'segments-table'},
        h('thead', {}, h('tr', {}, ['#', 'time', 'speaker', 'source'].map((x) => h('th', {}, x)))),
        h('tbody', {}, lines.map((sg) => h('tr', {id: 'seg-' + sg.n},
          h('td', {class: 'num'}, String(sg.n)),
          h('td', {class: 'num nowrap'}, clockMs(sg.startMs) + '–' + clockMs(sg.endMs)),
          h('td', {}, sg.speaker || '—'),
          h('td', {class: 'wrap'}, sg.sourceText || '')))))));
      return;
    }
    const row = (sg) => {
      const text = h('input', {type: 'text', id: 'seg-text-' + sg.n, value: sg.text ?? '', placeholder: '(not translated)',
        'aria-label': 'translation of line ' + sg.n, disabled: !done || readonly(), style: 'width:100%;min-width:200px'});
      const btn = h('button', {type: 'button', id: 'redub-' + sg.n, class: 'small admin-only', disabled: !done}, 'Redub');
      btn.addEventListener('click', action(() => api(API.redub(id), {method: 'POST', body: {segment: sg.n, text: text.value}}),
        (out) => { flash(`Line ${sg.n} is being redubbed as version ${pick(out, 'version') ?? '?'}`); text.blur(); reload().catch(report); }));
      text.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') { ev.preventDefault(); btn.click(); } });
      return h('tr', {id: 'seg-' + sg.n},
        h('td', {class: 'num'}, String(sg.n)),
        h('td', {class: 'num nowrap'}, clockMs(sg.startMs) + '–' + clockMs(sg.endMs)),
        h('td', {}, [sg.speaker, sg.voice].filter(Boolean).join(' · ') || '—'),
        h('td', {class: 'wrap'}, sg.sourceText || ''),
        h('td', {}, text),
        h('td', {class: 'wrap muted'}, fitNote(sg)),
        h('td', {}, btn));
    };
    fill(box, summary, h('div', {class: 'tablebox', style: 'max-height:480px;overflow:auto'}, h('table', {id: 'segments-table'},
      h('thead', {}, h('tr', {}, ['#', 'time', 'speaker · voice', 'source', 'translation', 'fit', ''].map((x) => h('th', {}, x)))),
      h('tbody', {}, lines.map(row)))));
  }
  function clockMs(ms) {
    const v = Number(ms) || 0;
    return `${Math.floor(v / 60000)}:${String(Math.floor(v / 1000) % 60).padStart(2, '0')}.${String(v % 1000).padStart(3, '0')}`;
  }
  // fitNote sums up what synthesis recorded about a line's fit in its slot.
  function fitNote(sg) {
    if (sg.error) return 'error: ' + sg.error;
    if (!sg.synthesized) return '(no audio yet)';
    const fit = sg.fit;
    if (!fit || typeof fit !== 'object') return '';
    return Object.entries(fit).filter(([, v]) => v !== null && typeof v !== 'object').slice(0, 5)
      .map(([k, v]) => `${k.replace(/_/g, ' ')} ${typeof v === 'number' ? Math.round(v * 100) / 100 : v}`).join(' · ');
  }
  // showEvents lists the task's timeline (GET /api/tasks/{id}/timeline):
  // each event with its time, the time since the task was created, and
  // what it says.
  const EVENT_STATUS = {created: 'queued', attempt_started: 'running', retry: 'retrying', replay: 'retrying', dead_letter: 'dead_lettered',
    dead_letter_replayed: 'retrying', dead_letter_purged: 'cancelled', compensation: 'compensating', compensation_requeued: 'retrying',
    version: 'redubbing', operator: 'assigned', hand_back: 'waiting', skipped: 'skipped', review: 'review',
    review_edit: 'assigned', review_approved: 'running'};
  function showEvents(box, data) {
    const events = listOf(data, 'events');
    if (!events.length) { fill(box, h('p', {class: 'muted'}, 'No events.')); return; }
    const t0 = new Date(events[0].at).getTime();
    fill(box, h('div', {class: 'tablebox'}, h('table', {id: 'timeline-table'},
      h('colgroup', {}, h('col', {style: 'width:110px'}), h('col', {style: 'width:80px'}), h('col', {style: 'width:190px'}),
        h('col', {style: 'width:190px'}), h('col', {style: 'width:230px'}), h('col', {})),
      h('thead', {}, h('tr', {}, ['Time', '+', 'Event', 'Step · part · attempt', 'Worker / by', 'Detail'].map((c) => h('th', {}, c)))),
      h('tbody', {}, events.map((e) => {
        const kind = e.kind || '?';
        const st = kind === 'attempt_ended' || kind === 'ended' ? e.status : EVENT_STATUS[kind];
        const where = [e.step, e.part ? 'part ' + e.part : null, e.attempt ? '#' + e.attempt : null].filter(Boolean).join(' · ');
        const times = kind === 'hand_back' && e.count > 1 ? `${e.count} times, the last at ${new Date(e.until).toLocaleTimeString()}` : null;
        const detail = [times, e.detail, e.delayMs !== undefined && e.delayMs !== null ? `after ${dur(e.delayMs)}` : null,
          e.ref !== undefined && e.ref !== null ? 'ref ' + e.ref : null, kind === 'attempt_ended' || kind === 'ended' || kind === 'hand_back' ? null : e.status].filter(Boolean).join(' · ');
        return h('tr', {'data-kind': kind},
          h('td', {class: 'num', title: new Date(e.at).toLocaleString()}, new Date(e.at).toLocaleTimeString()),
          h('td', {class: 'num muted'}, dur(new Date(e.at).getTime() - t0)),
          h('td', {}, h('span', {class: 'badge s-' + (st || 'unknown'), title: kind}, kind.replace(/_/g, ' ')),
            kind === 'hand_back' && e.status ? h('div', {class: 'small muted hand-back-reason'}, e.status.replace(/_/g, ' ')) : null),
          h('td', {class: 'wrap'}, where || '—'),
          h('td', {class: 'wrap mono small'}, e.worker || e.actor || '—'),
          h('td', {class: 'wrap'}, detail ? copyable(detail) : '—'));
      })))));
  }
  // showVersions lists every output of the task, with what changed and a
  // download link of each ready one.
  function showVersions(box, data) {
    const vs = listOf(data, 'versions');
    const links = pick(data, 'links') || {};
    if (!vs.length) { fill(box, h('p', {class: 'muted'}, 'No output yet.')); return; }
    fill(box, h('div', {class: 'tablebox'}, h('table', {id: 'versions-table'},
      h('colgroup', {}, h('col', {style: 'width:60px'}), h('col', {style: 'width:120px'}), h('col', {style: 'width:90px'}), h('col', {}),
        h('col', {style: 'width:110px'}), h('col', {style: 'width:130px'})),
      h('thead', {}, h('tr', {}, ['#', 'Created', 'Line', 'Change', 'State', ''].map((c) => h('th', {}, c)))),
      h('tbody', {}, vs.map((v) => {
        const url = links[String(v.version)];
        const burned = (pick(data, 'burnedLinks') || {})[String(v.version)];
        return h('tr', {'data-version': v.version},
          h('td', {class: 'num'}, 'v' + v.version),
          h('td', {}, timeCell(v.createdAt)),
          h('td', {class: 'num'}, v.segment ?? '—'),
          h('td', {class: 'wrap'}, v.segment ? [h('span', {class: 'muted'}, v.previousText ?? ''), ' → ', h('strong', {}, v.text ?? '')] : 'the first dub'),
          h('td', {}, badge(v.ready ? 'done' : 'running')),
          h('td', {}, url ? h('a', {href: url, target: '_blank', rel: 'noopener', class: 'version-link'}, 'Download v' + v.version)
            : h('span', {class: 'muted mono', title: v.outputVideoKey}, v.ready ? 'no link' : 'not ready'),
          burned ? [h('br'), h('a', {href: burned, target: '_blank', rel: 'noopener', class: 'version-burned-link'}, 'burned in')] : null));
      })))));
  }
  function showTaskDeadLetters(box, items, reload) {
    if (!items || !items.length) { fill(box, h('p', {class: 'muted'}, 'None.')); return; }
    fill(box, h('div', {class: 'tablebox'}, h('table', {id: 'task-dead-letters'}, deadLetterHead(),
      h('tbody', {}, items.map((d) => deadLetterRows(d, reload))))));
  }

  // ---- review: a task's lines before the voice is made ----
  // A task submitted with review waits in the status review after asr (its
  // transcript) or after translate (its translation). The panel lists its
  // lines, each editable (times, speaker, source, translation; split
  // before a word, merge with the next, delete), with its source audio to
  // listen to; the lines go out as SRT/WebVTT and come back edited; Approve
  // lets the chain go on. Every edit is kept in the timeline and the audit.
  // force re-renders even while a line is being edited (after an edit of
  // this page's own).
  function showReview(box, id, rv, reload, force) {
    if (!force && (box.contains(document.activeElement) || box.querySelector('tr.dirty'))) return; // keep an edit in progress
    const lines = listOf(rv, 'lines');
    const stage = pick(rv, 'stage') || '';
    const since = pick(rv, 'since');
    const ro = readonly();
    const after = (out) => {
      const e = pick(out, 'edit') || {};
      flash(e.action === 'import' ? `Imported ${listOf(out, 'lines').length} lines` : `Line ${e.line}: ${e.action} saved`);
      const edits = [...listOf(rv, 'edits'), e];
      showReview(box, id, Object.assign({}, rv, {lines: listOf(out, 'lines'), edits}), reload, true);
      reload().catch(report); // the segments below, and the review as the server has it
    };
    const edit = (body) => api(API.reviewEdit(id), {method: 'POST', body});
    const approve = h('button', {type: 'button', id: 'review-approve', class: 'primary admin-only', disabled: !lines.length}, 'Approve');
    approve.addEventListener('click', action(() => api(API.reviewApprove(id), {method: 'POST', body: {}}),
      (out) => { flash(`Approved the ${pick(out, 'stage')}: ${pick(out, 'lines')} lines go on`); reload().catch(report); }));
    fill(box,
      h('div', {class: 'row'}, h('h2', {style: 'margin:0'}, `Review of the ${stage}`),
        h('span', {class: 'muted', id: 'review-waiting'}, since ? `waiting for ${dur(between(since))} · ` : '',
          `${lines.length} lines · ${listOf(rv, 'edits').length} edits`),
        h('span', {class: 'spacer'}),
        h('a', {href: API.reviewExport(id, 'srt'), id: 'review-export-srt', download: ''}, 'Export SRT'),
        h('a', {href: API.reviewExport(id, 'vtt'), id: 'review-export-vtt', download: ''}, 'Export WebVTT'),
        reviewImport(id, after, ro), approve),
      h('audio', {id: 'review-audio', preload: 'none'}),
      h('p', {class: 'muted small'}, stage === 'transcript'
        ? 'Fix what was heard: a line whose text changes is translated when you approve. Times in seconds.'
        : 'Fix the translations: a line whose source text changes is translated again when you approve. Times in seconds.'),
      lines.length ? h('div', {class: 'tablebox', style: 'max-height:560px;overflow:auto'}, h('table', {id: 'review-table'},
        h('colgroup', {}, h('col', {style: 'width:40px'}), h('col', {style: 'width:200px'}), h('col', {style: 'width:110px'}),
          h('col', {}), h('col', {}), h('col', {style: 'width:260px'})),
        h('thead', {}, h('tr', {}, ['#', 'start – end (s)', 'speaker', 'source', 'translation', ''].map((x) => h('th', {}, x)))),
        h('tbody', {}, lines.map((l, i) => reviewRow(id, l, i === lines.length - 1, ro, edit, after)))))
        : h('p', {class: 'muted', id: 'review-empty'}, 'No lines left: import a subtitle file, or cancel the task.'));
  }
  // reviewRow is one editable line of the review table.
  function reviewRow(id, l, last, ro, edit, after) {
    const n = l.n;
    const input = (name, value, attrs) => h('input', Object.assign({type: 'text', id: `review-${name}-${n}`, value: value ?? '',
      disabled: ro, 'aria-label': `${name} of line ${n}`}, attrs || {}));
    const secs = (ms) => (ms / 1000).toFixed(3);
    const start = input('start', secs(l.startMs), {type: 'number', step: '0.001', min: '0', style: 'width:72px'});
    const end = input('end', secs(l.endMs), {type: 'number', step: '0.001', min: '0', style: 'width:72px'});
    const speaker = input('speaker', l.speaker, {maxlength: 64, style: 'width:100%', placeholder: '—'});
    const source = input('source', l.source, {maxlength: 2000, style: 'width:100%;min-width:160px'});
    const text = input('text', l.text, {maxlength: 2000, style: 'width:100%;min-width:160px', placeholder: '(translated on approval)'});
    const word = input('word', '', {type: 'number', min: '2', step: '1', style: 'width:80px', placeholder: 'word #', title: 'split before this word (numbered from 1)', class: 'admin-only'});
    const tr = h('tr', {id: 'review-line-' + n});
    const changes = () => {
      const c = {};
      const ms = (el) => Math.round(Number(el.value) * 1000);
      if (ms(start) !== l.startMs) c.startMs = ms(start);
      if (ms(end) !== l.endMs) c.endMs = ms(end);
      if (speaker.value.trim() !== (l.speaker || '')) c.speaker = speaker.value.trim();
      if (source.value.trim() !== l.source) c.source = source.value.trim();
      if (text.value.trim() !== (l.text ?? '')) c.text = text.value.trim();
      return c;
    };
    for (const el of [start, end, speaker, source, text]) {
      el.addEventListener('input', () => tr.classList.toggle('dirty', Object.keys(changes()).length > 0));
      el.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') { ev.preventDefault(); save.click(); } });
    }
    const btn = (name, label, fn, attrs) => {
      const b = h('button', Object.assign({type: 'button', id: `review-${name}-${n}`, class: 'small admin-only'}, attrs || {}), label);
      b.addEventListener('click', action(fn, after));
      return b;
    };
    const save = btn('save', 'Save', () => {
      const c = changes();
      if (!Object.keys(c).length) return Promise.reject(new Error(`Line ${n}: nothing changed`));
      return edit(Object.assign({line: n}, c));
    });
    const play = h('button', {type: 'button', id: 'review-play-' + n, class: 'small', title: 'listen to the line\'s source audio'}, '▶');
    play.addEventListener('click', () => playLine(API.reviewAudio(id, n)));
    append(tr, [h('td', {class: 'num'}, String(n)), h('td', {class: 'nowrap'}, start, ' – ', end), h('td', {}, speaker),
      h('td', {}, source), h('td', {}, text),
      h('td', {class: 'nowrap'}, h('div', {}, play, ' ', save, ' ',
        btn('merge', 'Merge ↓', () => edit({line: n, action: 'merge'}), {disabled: last, title: 'merge with the next line'}), ' ',
        btn('delete', 'Delete', () => edit({line: n, action: 'delete'}), {class: 'small danger admin-only'})),
      h('div', {style: 'margin-top:4px'}, word, ' ',
        btn('split', 'Split', () => edit({line: n, action: 'split', word: Number(word.value)}))))]);
    return tr;
  }
  // reviewImport is the import control: a subtitle file, which text it
  // holds, and the button that sends it.
  function reviewImport(id, after, ro) {
    if (ro) return null;
    const file = h('input', {type: 'file', id: 'review-import-file', accept: '.srt,.vtt,text/vtt,application/x-subrip', style: 'max-width:200px'});
    const which = h('select', {id: 'review-import-text', 'aria-label': 'the text the file holds'},
      h('option', {value: 'source'}, 'source text'), h('option', {value: 'target'}, 'translation'));
    const send = h('button', {type: 'button', id: 'review-import', class: 'small'}, 'Import');
    send.addEventListener('click', action(async () => {
      if (!file.files.length) throw new Error('Choose a subtitle file (SRT or WebVTT) to import');
      return api(API.reviewImport(id), {method: 'POST', body: {text: which.value, subtitles: await file.files[0].text()}});
    }, after));
    return h('span', {class: 'row', style: 'gap:4px'}, file, which, send);
  }
  // playLine plays a line's source audio in the review's player (one for
  // all lines: a line played stops the one playing).
  function playLine(url) {
    const player = $('#review-audio');
    if (!player) return;
    player.src = url;
    player.play().catch((e) => report(new Error('The line\'s audio cannot be played: ' + e.message)));
  }

  // ---- upload ----
  // A small file goes as multipart/form-data to POST /api/tasks; a large
  // one is posted to the object store with a presigned POST policy (POST
  // /api/uploads: the store takes one file of at most maxBytes, of the
  // type asked for, under the upload's key), then POST /api/tasks
  // {sourceVideoKey} starts the task. Both through XMLHttpRequest, the one
  // browser API that reports upload progress.
  function pageUpload(main) {
    const file = h('input', {type: 'file', id: 'video', name: 'video', accept: 'video/*,.mp4,.mkv,.mov,.webm', required: true});
    const langs = (id, val) => h('input', {type: 'text', id, name: id, value: val, required: true, size: 6, pattern: '[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*', title: 'a language code such as en, es or pt-BR'});
    const source = langs('source', 'en');
    const target = langs('target', 'es');
    // Several languages, separated by commas: transcribed once, one child
    // task per language.
    target.size = 14;
    target.pattern = '\\s*[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*(\\s*,\\s*[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*)*\\s*';
    target.title = 'one language code such as es, or several separated by commas: es, ca, fr';
    const speaker = h('input', {type: 'text', id: 'speaker', name: 'speaker', placeholder: 'default voice'});
    // Review before the voice: the task stops after asr and/or translate
    // for a person's edits of its lines (one language only).
    const reviewBox = (stage) => h('input', {type: 'checkbox', id: 'review-' + stage, name: 'review', value: stage});
    const reviews = [reviewBox('transcript'), reviewBox('translation')];
    const glossary = h('textarea', {id: 'glossary', name: 'glossary', rows: 3, style: 'width:100%',
      placeholder: 'CSV, one term a line: source,target\nqueue,cola\ndubflow,   (empty target: keep the term)'});
    // A subtitle file (SRT or WebVTT) instead of recognising the speech:
    // sent as the text of the field subtitles, in either door.
    const subtitles = h('input', {type: 'file', id: 'subtitles', name: 'subtitles', accept: '.srt,.vtt,text/vtt,application/x-subrip'});
    const subtitlesLanguage = h('input', {type: 'text', id: 'subtitlesLanguage', name: 'subtitlesLanguage', size: 6,
      placeholder: 'source', pattern: '[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*', title: 'the language of the subtitles: the spoken one (default) or the one to dub into'});
    const burn = h('select', {id: 'burnSubtitles', name: 'burnSubtitles'},
      h('option', {value: ''}, 'no'), h('option', {value: 'target'}, 'the dub\'s lines'), h('option', {value: 'bilingual'}, 'both languages'));
    const bar = h('i', {});
    const status = h('span', {class: 'num', id: 'upload-status'}, 'Choose a video.');
    const submit = h('button', {type: 'submit', class: 'primary', id: 'upload'}, 'Upload and dub');
    const drop = h('div', {class: 'drop', id: 'drop'}, 'Drop a video here or ', file);
    drop.addEventListener('dragover', (ev) => { ev.preventDefault(); drop.classList.add('over'); });
    drop.addEventListener('dragleave', () => drop.classList.remove('over'));
    drop.addEventListener('drop', (ev) => {
      ev.preventDefault();
      drop.classList.remove('over');
      if (ev.dataTransfer.files.length) { file.files = ev.dataTransfer.files; file.dispatchEvent(new Event('change')); }
    });
    file.addEventListener('change', () => {
      const f = file.files[0];
      status.textContent = f ? `${f.name} · ${bytes(f.size)}` : 'Choose a video.';
    });
    const form = h('form', {class: 'panel', id: 'upload-form', style: 'max-width:720px'},
      h('h1', {}, 'Upload a video'), drop,
      h('div', {class: 'row'},
        h('div', {}, h('label', {for: 'source'}, 'Spoken language'), source),
        h('div', {}, h('label', {for: 'target'}, 'Dub into (es, ca, …)'), target),
        h('div', {}, h('label', {for: 'speaker'}, 'Speaker (voice)'), speaker)),
      h('label', {for: 'glossary'}, 'Glossary (optional, CSV as for dubctl --glossary: source,target a line, at most 1000 terms)'), glossary,
      h('div', {class: 'row'},
        h('div', {}, h('label', {for: 'subtitles'}, 'Your subtitles (optional, SRT or WebVTT: no speech recognition)'), subtitles),
        h('div', {}, h('label', {for: 'subtitlesLanguage'}, 'Their language'), subtitlesLanguage),
        h('div', {}, h('label', {for: 'burnSubtitles'}, 'Burn subtitles in'), burn)),
      h('div', {class: 'row', id: 'review-choice', style: 'margin-top:8px'}, h('span', {}, 'Stop for review before the voice:'),
        h('label', {for: 'review-transcript', class: 'inline'}, reviews[0], ' the transcript'),
        h('label', {for: 'review-translation', class: 'inline'}, reviews[1], ' the translation')),
      h('div', {style: 'margin:14px 0 6px'}, h('div', {class: 'bar big'}, bar)),
      h('div', {class: 'row'}, status, h('span', {class: 'spacer'}), submit));
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      if (!file.files.length) { status.textContent = 'Choose a video first.'; return; }
      const fields = {source: source.value.trim(), target: target.value.trim()};
      if (speaker.value.trim()) fields.speaker = speaker.value.trim();
      if (glossary.value.trim()) fields.glossary = glossary.value;
      const review = reviews.filter((r) => r.checked).map((r) => r.value);
      if (review.length) fields.review = review.join(',');
      if (subtitles.files.length) fields.subtitles = await subtitles.files[0].text();
      if (subtitlesLanguage.value.trim()) fields.subtitlesLanguage = subtitlesLanguage.value.trim();
      if (burn.value) fields.burnSubtitles = burn.value;
      const video = file.files[0];
      let sent;
      if (video.size > PRESIGN_ABOVE) {
        sent = presignedUpload(video, fields, bar, status);
      } else {
        const fd = new FormData();
        for (const [k, v] of Object.entries(fields)) fd.append(k, v);
        fd.append('video', video); // last: the server streams it after reading the fields
        sent = sendUpload(fd, bar, status);
      }
      submit.disabled = true;
      sent.then((id) => go('/tasks/' + enc(id)))
        .catch((e) => { status.textContent = e.message; flash(e.message, true); })
        .finally(() => { submit.disabled = false; });
    });
    fill(main, form);
  }
  function showProgressOf(xhr, bar, status) {
    xhr.upload.onprogress = (ev) => {
      if (!ev.lengthComputable) return;
      bar.style.width = (ev.loaded / ev.total * 100).toFixed(1) + '%';
      status.textContent = `Uploading ${bytes(ev.loaded)} of ${bytes(ev.total)} (${Math.floor(ev.loaded / ev.total * 100)}%)`;
    };
    xhr.upload.onload = () => { status.textContent = 'Uploaded; creating the task…'; };
  }
  // presignedUpload reserves a task id and an upload policy, posts the
  // file to the object store with it and starts the task from the stored
  // object.
  async function presignedUpload(video, fields, bar, status) {
    status.textContent = 'Reserving the upload…';
    const type = (video.type || '').startsWith('video/') ? video.type : 'video/mp4';
    const up = await api(API.uploads, {method: 'POST', body: chosenProject() ? {contentType: type, project: chosenProject()} : {contentType: type}});
    const max = pick(up, 'maxBytes');
    if (max && video.size > max) throw new Error(`The video is ${bytes(video.size)}, larger than the limit of ${bytes(max)} (MAX_VIDEO_BYTES).`);
    const form = new FormData();
    for (const [k, v] of Object.entries(pick(up, 'fields') || {})) form.append(k, v);
    form.append(pick(up, 'fileField') || 'file', video); // last: the store reads the rest as the file
    await new Promise((resolve, reject) => {
      const xhr = new XMLHttpRequest();
      xhr.open(pick(up, 'method') || 'POST', pick(up, 'uploadUrl'));
      showProgressOf(xhr, bar, status);
      xhr.onerror = () => reject(new Error('The upload to the object store failed: the network, or the store does not allow this page (CONSOLE_PUBLIC_S3_URL, CORS: see the console README).'));
      xhr.onload = () => (xhr.status >= 200 && xhr.status < 300 ? resolve()
        : reject(new Error(`object store: HTTP ${xhr.status}${storeError(xhr.responseText)}`)));
      xhr.send(form);
    });
    const body = Object.assign({sourceVideoKey: pick(up, 'sourceVideoKey'), fileName: video.name}, fields);
    if (body.review) body.review = body.review.split(','); // the JSON body takes a list
    const out = await api(API.tasks, {method: 'POST', body});
    return pick(out, 'taskId');
  }
  // storeError reads the message of an S3 error answer (XML), if any.
  function storeError(text) {
    const m = /<Message>([^<]*)<\/Message>/.exec(text || '');
    return m ? ': ' + m[1] : '';
  }
  function sendUpload(fd, bar, status) {
    return new Promise((resolve, reject) => {
      const xhr = new XMLHttpRequest();
      xhr.open('POST', API.tasks);
      for (const [k, v] of Object.entries(headers('POST'))) xhr.setRequestHeader(k, v);
      showProgressOf(xhr, bar, status);
      xhr.onerror = () => reject(new Error('The upload failed (network error).'));
      xhr.onload = () => {
        let data = {};
        try { data = JSON.parse(xhr.responseText); } catch { /* not JSON */ }
        if (xhr.status === 401) { toLogin(); reject(new Error('not logged in')); return; }
        if (xhr.status < 200 || xhr.status >= 300) { reject(new Error(pick(data, 'error', 'message') || `upload: HTTP ${xhr.status}`)); return; }
        const id = pick(data, 'taskId', 'task_id', 'id');
        if (!id) { reject(new Error('the server answered without a task id')); return; }
        resolve(id);
      };
      xhr.send(fd);
    });
  }

  // ---- dead letters and compensation ----
  async function pageDeadLetters(main, ctx) {
    const tbody = h('tbody', {id: 'dlq-body'});
    fill(main, h('div', {class: 'row', style: 'margin-bottom:12px'}, h('h1', {style: 'margin:0'}, 'Dead letters'),
      h('span', {class: 'muted'}, 'Messages that failed for good. Replay runs the step again with a fresh retry budget once the cause is fixed.')),
    bulkPanel(() => load(true)),
    h('div', {class: 'tablebox'}, h('table', {id: 'dead-letters'}, deadLetterHead(), tbody)));
    // Refreshed every 5 s; a row whose details are open, or whose replay
    // is under way, keeps the list as it is until the next round.
    const load = async (force) => {
      if (!force && tbody.querySelector('tr.detail:not([hidden]), button.replay:disabled:not([data-replayed])')) return;
      const data = await api(API.deadLetters + '?limit=100', {signal: ctx.signal});
      const items = listOf(data, 'deadLetters');
      fill(tbody, items.length ? items.map((d) => deadLetterRows(d, load))
        : h('tr', {class: 'empty'}, h('td', {colspan: 7}, 'No dead letters. Nothing has failed for good.')));
    };
    every(ctx, 5000, load);
  }
  // bulkPanel replays or purges every dead letter matching a filter: a dry
  // run counts them first, and the action asks for a confirmation naming
  // the count. Changing the filter asks for a new count.
  function bulkPanel(reload) {
    const step = h('select', {id: 'bulk-step', 'aria-label': 'step'}, ['', ...STEPS].map((x) => h('option', {value: x}, x || 'any step')));
    const cls = h('select', {id: 'bulk-class', 'aria-label': 'error class'},
      ['', 'permanent', 'transient', 'timeout', 'invalid', 'broker'].map((x) => h('option', {value: x}, x || 'any class')));
    const since = h('select', {id: 'bulk-since', 'aria-label': 'failed within'},
      [['', 'any time'], ['1h', 'last hour'], ['24h', 'last 24 h'], ['7d', 'last 7 days']].map(([v, l]) => h('option', {value: v}, l)));
    const pending = h('input', {type: 'checkbox', id: 'bulk-pending', checked: true});
    const count = h('button', {type: 'button', id: 'bulk-count'}, 'Count matching');
    const result = h('span', {id: 'bulk-result', class: 'muted'}, 'Choose a filter and count what it matches.');
    const replay = h('button', {type: 'button', id: 'bulk-replay', disabled: true}, 'Replay…');
    const purge = h('button', {type: 'button', id: 'bulk-purge', class: 'danger', disabled: true}, 'Purge…');
    const confirmBox = h('div', {class: 'confirm', id: 'bulk-confirm', hidden: true});
    const filter = () => {
      const f = {pending: pending.checked};
      if (step.value) f.step = step.value;
      if (cls.value) f.errorClass = cls.value;
      if (since.value) f.since = since.value;
      return f;
    };
    const describe = (f) => [f.step ? 'step ' + f.step : 'any step', f.errorClass ? 'class ' + f.errorClass : null,
      f.since ? 'failed in the last ' + f.since : null, f.pending ? 'not replayed yet' : null].filter(Boolean).join(', ');
    let counted = null;
    const reset = () => { counted = null; replay.disabled = purge.disabled = true; replay.textContent = 'Replay…'; purge.textContent = 'Purge…'; confirmBox.hidden = true; };
    for (const el of [step, cls, since, pending]) el.addEventListener('change', () => { reset(); result.textContent = 'Filter changed: count again.'; });
    count.addEventListener('click', action(() => api(API.bulkReplay, {method: 'POST', body: {...filter(), dryRun: true}}), (out) => {
      counted = {filter: filter(), matched: pick(out, 'matched') ?? 0, replayable: pick(out, 'replayable') ?? 0};
      result.textContent = `${counted.matched} dead letters match (${describe(counted.filter)}); ${counted.replayable} can be replayed.`;
      result.dataset.matched = counted.matched;
      replay.disabled = !counted.replayable;
      purge.disabled = !counted.matched;
      replay.textContent = `Replay ${counted.replayable}…`;
      purge.textContent = `Purge ${counted.matched}…`;
      confirmBox.hidden = true;
    }));
    const ask = (verb, n, url, done) => {
      const yes = h('button', {type: 'button', id: 'bulk-yes', class: verb === 'purge' ? 'danger' : 'primary'}, `Yes, ${verb} ${n}`);
      const no = h('button', {type: 'button', id: 'bulk-no', onclick: () => { confirmBox.hidden = true; }}, 'Cancel');
      yes.addEventListener('click', action(() => api(url, {method: 'POST', body: {...counted.filter, dryRun: false}}), (out) => {
        done(out);
        reset();
        reload().catch(report);
      }));
      fill(confirmBox, h('strong', {}, `${verb === 'purge' ? 'Purge' : 'Replay'} ${n} dead letters (${describe(counted.filter)})?`),
        h('span', {class: 'muted'}, verb === 'purge' ? ' They are deleted from the list and kept in the archive.' : ' Each runs its step again with a fresh retry budget.'),
        h('span', {class: 'spacer'}), no, yes);
      confirmBox.hidden = false;
    };
    replay.addEventListener('click', () => ask('replay', counted.replayable, API.bulkReplay, (out) => {
      const errs = listOf(out, 'errors');
      result.textContent = `Replayed ${listOf(out, 'replayed').length}` + (errs.length ? `; ${errs.length} could not be replayed` : '') + '.';
      flash(result.textContent, errs.length > 0);
    }));
    purge.addEventListener('click', () => ask('purge', counted.matched, API.bulkPurge, (out) => {
      result.textContent = `Purged ${listOf(out, 'purged').length} (kept in the archive).`;
      flash(result.textContent);
    }));
    return h('div', {class: 'panel admin-only', id: 'bulk'},
      h('div', {class: 'row'}, h('h2', {style: 'margin:0'}, 'Bulk actions'), step, cls, since,
        h('label', {class: 'inline', for: 'bulk-pending'}, pending, ' not replayed yet'), count, replay, purge),
      h('p', {style: 'margin:8px 0 0'}, result), confirmBox);
  }
  function deadLetterHead() {
    return [h('colgroup', {}, h('col', {style: 'width:100px'}), h('col', {style: 'width:120px'}), h('col', {style: 'width:100px'}),
      h('col', {style: 'width:90px'}), h('col', {style: 'width:110px'}), h('col', {}), h('col', {style: 'width:170px'})),
    h('thead', {}, h('tr', {}, ['Failed', 'Step', 'Task', 'Attempt', 'Class', 'Reason', ''].map((c) => h('th', {}, c))))];
  }
  function deadLetterRows(d, reload) {
    const id = pick(d, 'id');
    const task = pick(d, 'taskId', 'task_id');
    const replayed = pick(d, 'replayedAt', 'replayed_at');
    const detail = h('tr', {class: 'detail', hidden: true}, h('td', {colspan: 7}, h('pre', {class: 'json'}, JSON.stringify(d, null, 2))));
    const show = h('button', {type: 'button', class: 'link', onclick: () => { detail.hidden = !detail.hidden; }}, 'details');
    const replay = h('button', {type: 'button', class: 'replay admin-only', disabled: !!replayed, 'data-id': id, 'data-replayed': replayed ? '1' : null,
      title: replayed ? 'replayed ' + when(replayed) : 'run the step again with a fresh retry budget'}, replayed ? 'replayed' : 'Replay');
    replay.addEventListener('click', action(() => api(API.replay(id), {method: 'POST', body: {force: false}}), () => {
      flash('Replayed: the step runs again');
      replay.textContent = 'replayed';
      replay.dataset.replayed = '1';
      replay.disabled = true;
      setTimeout(() => reload().catch(report), 500);
    }));
    const reason = pick(d, 'failureReason', 'failure_reason', 'reason') || '';
    return [h('tr', {'data-id': id},
      h('td', {'data-time': pick(d, 'failedAt', 'failed_at')}, timeCell(pick(d, 'failedAt', 'failed_at'))),
      h('td', {}, pick(d, 'step') || '—'),
      h('td', {class: 'mono'}, task ? h('a', {href: '/tasks/' + enc(task), title: task}, shortId(task)) : '—'),
      h('td', {class: 'num'}, pick(d, 'attempt') ?? '—'),
      h('td', {}, pick(d, 'errorClass', 'error_class') || '—'),
      h('td', {class: 'wrap clamp'}, copyable(reason)),
      h('td', {}, h('div', {class: 'row', style: 'gap:8px'}, show, replay))), detail];
  }
  async function pageCompensation(main, ctx) {
    const tbody = h('tbody', {id: 'comp-body'});
    const requeue = h('button', {type: 'button', id: 'requeue', class: 'admin-only'}, 'Requeue all');
    fill(main, h('div', {class: 'row', style: 'margin-bottom:12px'}, h('h1', {style: 'margin:0'}, 'TTS compensation'),
      h('span', {class: 'muted'}, 'Tasks with segments whose speech synthesis still failed after every retry.'), h('span', {class: 'spacer'}), requeue),
    h('div', {class: 'tablebox'}, h('table', {id: 'compensation'},
      h('colgroup', {}, h('col', {style: 'width:110px'}), h('col', {style: 'width:130px'}), h('col', {style: 'width:200px'}), h('col', {style: 'width:110px'}), h('col', {})),
      h('thead', {}, h('tr', {}, ['Task', 'Status', 'Missing segments', 'Updated', 'Last error'].map((c) => h('th', {}, c)))), tbody)));
    const load = async () => {
      const items = listOf(await api(API.compensation + '?limit=100', {signal: ctx.signal}), 'tasks');
      fill(tbody, items.length ? items.map((c) => {
        const task = pick(c, 'taskId');
        const missing = pick(c, 'missingSegments') || [];
        return h('tr', {},
          h('td', {class: 'mono'}, h('a', {href: '/tasks/' + enc(task), title: task}, shortId(task))),
          h('td', {}, badge(pick(c, 'status'))),
          h('td', {title: missing.join(', ')}, missing.length + ': ' + missing.join(', ')),
          h('td', {}, timeCell(pick(c, 'updatedAt'))),
          h('td', {title: pick(c, 'lastError') || '', class: 'muted'}, pick(c, 'lastError') || ''));
      }) : h('tr', {class: 'empty'}, h('td', {colspan: 5}, 'No task waits for speech re-synthesis.')));
      requeue.disabled = !items.length;
    };
    requeue.addEventListener('click', action(() => api(API.requeue, {method: 'POST', body: {limit: 100}}), (out) => {
      flash(`Requeued ${(pick(out, 'requeued') || []).length} tasks`);
      load().catch(report);
    }));
    await load();
  }

  // ---- system health ----
  // The charts are drawn from GET /api/metrics/history on load (the
  // console's shared samples, or Prometheus) and extended by fetching it
  // again every 15 s; the figures and queues poll /api/system/health and
  // /api/queues every 5 s.
  const COLORS = ['#1f5fbf', '#1a7f37', '#bf8700', '#8250df', '#cf222e', '#0a7e8c', '#6e7781', '#e16f24', '#bf3989'];
  const WINDOWS = {'1h': 3600e3, '6h': 6 * 3600e3, '24h': 24 * 3600e3};
  const CHARTS = [
    {id: 'chart-depth', title: 'Queue depth (messages ready)', series: ['queue_depth']},
    {id: 'chart-throughput', title: 'Step attempts per minute, and error rate (%)', series: ['step_attempts', 'error_rate']},
    {id: 'chart-duration', title: 'Step duration p50 / p95 (s)', series: ['step_duration_p50', 'step_duration_p95']},
    {id: 'chart-tasks', title: 'Tasks done / failed per minute', series: ['tasks_done', 'tasks_failed']},
  ];
  async function pageHealth(main, ctx) {
    const win = WINDOWS[new URLSearchParams(location.search).get('window')] ? new URLSearchParams(location.search).get('window') : '1h';
    const el = {
      status: h('div', {class: 'row', id: 'health-status', style: 'min-height:32px'}),
      reasons: h('ul', {class: 'reasons', id: 'health-reasons'}),
      stats: h('div', {class: 'grid4', id: 'health-stats'}),
      charts: CHARTS.map((c) => ({...c, svg: h('svg', {class: 'chart', id: c.id, role: 'img', 'aria-label': c.title}), legend: h('div', {class: 'legend'})})),
      source: h('span', {class: 'muted', id: 'history-source'}),
      work: h('tbody', {id: 'work-queues-body'}),
      queues: h('tbody', {id: 'queues-body'}),
      services: h('tbody', {id: 'services-body'}),
      engines: h('div', {id: 'engines'}),
      review: h('div', {id: 'health-review'}),
    };
    const windows = h('div', {class: 'filters', role: 'group', 'aria-label': 'Window'}, Object.keys(WINDOWS).map((w) =>
      h('button', {type: 'button', class: w === win ? 'on' : '', onclick: () => go('/health?window=' + w)}, w)));
    const panel = (c) => h('div', {class: 'panel'}, h('h2', {}, c.title), c.svg, c.legend);
    fill(main, h('div', {class: 'row', style: 'margin-bottom:8px'}, h('h1', {style: 'margin:0'}, 'System health'), el.status,
      h('span', {class: 'spacer'}), el.source, windows),
    el.reasons,
    h('div', {style: 'margin:12px 0 16px'}, el.stats),
    h('div', {class: 'grid2'}, panel(el.charts[0]), panel(el.charts[1])),
    h('div', {class: 'grid2'}, panel(el.charts[2]), panel(el.charts[3])),
    h('div', {class: 'panel'}, h('h2', {}, 'Work queues'), h('div', {class: 'tablebox'}, h('table', {id: 'work-queues'},
      h('colgroup', {}, h('col', {style: 'width:150px'}), h('col', {style: 'width:90px'}), h('col', {style: 'width:120px'}),
        h('col', {style: 'width:110px'}), h('col', {}), h('col', {style: 'width:120px'})),
      h('thead', {}, h('tr', {}, h('th', {}, 'Step'), h('th', {class: 'num'}, 'Ready'), h('th', {class: 'num'}, 'Consumers'),
        h('th', {class: 'num'}, 'Workers'), h('th', {}, 'State'), h('th', {}, ''))),
      el.work))),
    h('div', {class: 'panel'}, h('h2', {}, 'Engines'), el.engines),
    h('div', {class: 'panel'}, h('h2', {}, 'Waiting for review'), el.review),
    h('div', {class: 'grid2'},
      h('div', {class: 'panel'}, h('h2', {}, 'All queues'), h('table', {id: 'queues'},
        h('colgroup', {}, h('col', {}), h('col', {style: 'width:100px'}), h('col', {style: 'width:110px'})),
        h('thead', {}, h('tr', {}, h('th', {}, 'Queue'), h('th', {class: 'num'}, 'Ready'), h('th', {class: 'num'}, 'Consumers'))),
        el.queues)),
      h('div', {class: 'panel'}, h('h2', {}, 'Workers and dependencies'), h('table', {id: 'services'},
        h('colgroup', {}, h('col', {}), h('col', {style: 'width:120px'})),
        h('thead', {}, h('tr', {}, h('th', {}, 'Step / dependency'), h('th', {class: 'num'}, 'Consumers'))),
        el.services))));
    let history = null;
    const redraw = () => { if (history) drawHistory(el, history, WINDOWS[win]); };
    window.addEventListener('resize', redraw);
    ctx.cleanup(() => window.removeEventListener('resize', redraw));
    every(ctx, 15000, async () => {
      history = await api(API.history + '?since=' + win, {signal: ctx.signal});
      el.source.textContent = 'history from ' + (pick(history, 'source') || '?');
      redraw();
    });
    every(ctx, 5000, async () => {
      const [hd, qs] = await Promise.all([api(API.health, {signal: ctx.signal}), api(API.queues, {signal: ctx.signal})]);
      showHealth(el, hd);
      showWorkQueues(el.work, listOf(qs, 'queues'), () => api(API.queues, {signal: ctx.signal}).then((x) => showWorkQueues(el.work, listOf(x, 'queues'))));
    });
    every(ctx, 10000, async () => showEngines(el.engines, await api(API.engines, {signal: ctx.signal}).catch((e) => {
      if (e.status === 404 || e.status === 503) return {unavailable: e.status};
      throw e;
    })));
  }
  // showWorkQueues lists the steps' queues with Pause / Resume: a paused
  // step's workers stop taking messages within a second or two (running
  // steps finish) and its messages wait.
  function showWorkQueues(tbody, qs, reload) {
    if (tbody.querySelector('button:disabled')) return; // a pause or resume is under way
    fill(tbody, qs.map((q) => {
      const step = pick(q, 'step');
      const paused = !!pick(q, 'paused');
      const by = pick(q, 'changedBy');
      const btn = h('button', {type: 'button', class: 'small admin-only ' + (paused ? 'primary' : ''), id: (paused ? 'resume-' : 'pause-') + step},
        paused ? 'Resume' : 'Pause');
      btn.addEventListener('click', action(() => api(paused ? API.resume(step) : API.pause(step), {method: 'POST'}), () => {
        flash(paused ? `${step} resumed: its workers consume again` : `${step} paused: its workers stop taking messages`);
        setTimeout(() => reload().catch(report), 50);
      }));
      const consumers = pick(q, 'consumers') ?? 0;
      return h('tr', {'data-step': step, 'data-paused': paused ? '1' : '0'},
        h('td', {class: 'mono'}, step),
        h('td', {class: 'num'}, pick(q, 'ready') ?? 0),
        h('td', {class: 'num', style: consumers === 0 && !paused ? 'color:var(--bad);font-weight:600' : ''}, consumers),
        h('td', {class: 'num'}, pick(q, 'workers') ?? 0),
        h('td', {}, paused ? badge('paused') : badge('consuming'), ' ',
          h('span', {class: 'muted'}, pick(q, 'changedAt') ? `${paused ? 'paused' : 'resumed'} ${when(pick(q, 'changedAt'))}${by ? ' by ' + by : ''}` : '')),
        h('td', {}, btn));
    }));
  }
  // showEngines lists each engine's quota, load and breaker
  // (GET /api/engines); a console without it says so.
  function showEngines(box, data) {
    if (data && data.unavailable) {
      fill(box, h('p', {class: 'muted', id: 'engines-none'}, 'No engine figures: this console does not serve GET /api/engines.'));
      return;
    }
    const list = listOf(data, 'engines');
    const q = (e, used, left) => {
      const u = pick(e, ...used);
      const l = pick(e, ...left);
      if (u === undefined && l === undefined) return '—';
      return `${u ?? '—'} / ${l === -1 ? 'no quota' : (l ?? '—')}`;
    };
    fill(box, h('div', {class: 'tablebox'}, h('table', {id: 'engines-table'},
      h('colgroup', {}, h('col', {style: 'width:110px'}), h('col', {}), h('col', {style: 'width:140px'}), h('col', {style: 'width:90px'}),
        h('col', {style: 'width:140px'}), h('col', {style: 'width:80px'}), h('col', {style: 'width:120px'})),
      h('thead', {}, h('tr', {}, h('th', {}, 'Step'), h('th', {}, 'Engine'), h('th', {class: 'num'}, 'Quota used / left'),
        h('th', {class: 'num'}, 'In flight'), h('th', {}, 'Next available'), h('th', {class: 'num'}, 'Errors'), h('th', {}, 'State'))),
      h('tbody', {}, list.length ? list.map((e) => {
        // state: ready, limited, broken, no_worker (a single engine no running worker announces).
        const state = pick(e, 'state', 'breakerState', 'breaker') || '—';
        const single = pick(e, 'pool') === 'single';
        return h('tr', {'data-engine': pick(e, 'name'), 'data-state': state},
          h('td', {class: 'mono'}, pick(e, 'step') || '—'),
          h('td', {class: 'wrap', title: single ? 'the step\'s single engine, shown as a pool of one' : ''},
            (pick(e, 'name', 'engine') || '—') + (single ? ' (single)' : '')),
          h('td', {class: 'num'}, q(e, ['quota_used', 'quotaUsed', 'used'], ['quota_left', 'quotaLeft', 'left', 'remaining'])),
          h('td', {class: 'num'}, pick(e, 'in_flight', 'inFlight', 'inflight') ?? '—'),
          h('td', {}, timeCell(pick(e, 'next_available_at', 'nextAvailable', 'nextAvailableAt'))),
          h('td', {class: 'num'}, pick(e, 'errors') ?? '—'),
          h('td', {}, badge(typeof state === 'string' ? state : JSON.stringify(state))));
      }) : h('tr', {class: 'empty'}, h('td', {colspan: 7}, 'No engine has reported yet.'))))));
  }
  // drawHistory draws each chart from the history's series; a chart of two
  // series draws the second dashed.
  const SERIES_LABEL = {step_attempts: 'attempts', error_rate: 'error %', step_duration_p50: 'p50', step_duration_p95: 'p95',
    tasks_done: 'done', tasks_failed: 'failed'};
  function drawHistory(el, history, window) {
    const byName = new Map(listOf(history, 'series').map((x) => [x.name, x]));
    for (const c of el.charts) {
      const lines = [];
      c.series.forEach((name, si) => {
        const scale = name === 'error_rate' ? 100 : 1;
        const ls = listOf(byName.get(name), 'lines').slice().sort((a, b) => rank(String(a.key)) - rank(String(b.key)) || String(a.key).localeCompare(String(b.key)));
        for (const l of ls) {
          const key = l.key && l.key !== name ? String(l.key) : '';
          const label = c.series.length > 1 ? SERIES_LABEL[name] || name : '';
          lines.push({name: [key, label].filter(Boolean).join(' ') || name, dashed: si > 0,
            points: listOf(l, 'points').map(([t, v]) => [t, v * scale])});
        }
      });
      lines.forEach((l, i) => { l.color = COLORS[i % COLORS.length]; });
      drawChart(c.svg, lines, {window});
      fill(c.legend, lines.length ? lines.map((x) => h('span', {}, h('i', {style: `background:${x.color}`}), x.name))
        : h('span', {}, 'no samples in this window yet'));
    }
  }
  // queuesOf returns [{name, ready, unacked, consumers}] from a list or a
  // map of queues.
  function queuesOf(hd) {
    const q = pick(hd, 'queues') || [];
    const list = Array.isArray(q) ? q : Object.entries(q).map(([name, v]) => ({name, ...v}));
    return list.map((x) => ({
      name: pick(x, 'name', 'queue'),
      kind: pick(x, 'kind') || '',
      ready: pick(x, 'ready', 'messages', 'messagesReady') ?? 0,
      consumers: pick(x, 'consumers') ?? 0,
    }));
  }
  function showHealth(el, hd) {
    const st = pick(hd, 'status');
    fill(el.status, badge(st), h('span', {class: 'muted'}, 'updated ', new Date().toLocaleTimeString()));
    const reasons = pick(hd, 'reasons') || [];
    fill(el.reasons, reasons.map((r) => h('li', {}, typeof r === 'string' ? r : JSON.stringify(r))));
    const sv = pick(hd, 'services') || {};
    const perf = pick(hd, 'performance') || {};
    const stat = (label, value, unit) => h('div', {class: 'panel', style: 'margin:0'}, h('div', {class: 'muted'}, label), h('div', {class: 'stat'}, value, ' ', h('small', {}, unit || '')));
    fill(el.stats,
      stat('Workers available', `${sv.available ?? '—'} / ${sv.total ?? '—'}`, 'utilization ' + pct(pick(sv, 'utilizationRate'))),
      stat('Throughput', num(pick(perf, 'throughput'), 1), 'step attempts / min, last hour'),
      stat('Average step time', dur(pick(perf, 'avgResponseTime') ?? NaN), 'last hour'),
      stat('Error rate', pct(pick(perf, 'errorRate')), 'of finished steps, last hour'));
    const qs = queuesOf(hd);
    fill(el.queues, qs.length ? qs.map((x) => h('tr', {'data-queue': x.name},
      h('td', {class: 'mono'}, x.name), h('td', {class: 'num'}, x.ready),
      h('td', {class: 'num', style: x.consumers === 0 && /^task\.(extract_audio|asr|translate|tts|mux_video)$/.test(x.name) ? 'color:var(--bad);font-weight:600' : ''}, x.consumers)))
      : h('tr', {class: 'empty'}, h('td', {colspan: 3}, 'No queue information.')));
    const steps = pick(sv, 'steps') || [];
    fill(el.services, steps.length ? steps.map((x) => h('tr', {'data-step': x.step}, h('td', {}, x.step),
      h('td', {class: 'num', style: x.consumers === 0 ? 'color:var(--bad);font-weight:600' : ''}, x.consumers ?? '—')))
      : h('tr', {class: 'empty'}, h('td', {colspan: 2}, 'No per-step figures.')));
    showReviewWaits(el.review, pick(hd, 'review') || {});
    const deps = pick(hd, 'dependencies') || {};
    for (const [k, v] of Object.entries(deps)) {
      el.services.append(h('tr', {}, h('td', {class: 'muted'}, k), h('td', {class: 'num'}, v === 'ok' ? badge('healthy') : h('span', {title: v}, badge('unhealthy')))));
    }
  }
  // showReviewWaits lists the tasks waiting in review, the longest waiting
  // first: never a reason of the status, they wait for a person.
  function showReviewWaits(box, rw) {
    const tasks = listOf(rw, 'tasks');
    if (!tasks.length) { fill(box, h('p', {class: 'muted'}, 'No task waits for review.')); return; }
    fill(box, h('p', {class: 'muted'}, `${pick(rw, 'count') ?? tasks.length} tasks wait for a person's edits (not stuck: nothing runs for them).`),
      h('table', {id: 'review-waits'}, h('thead', {}, h('tr', {}, ['Task', 'Stage', 'Waiting'].map((c) => h('th', {}, c)))),
        h('tbody', {}, tasks.map((t) => h('tr', {'data-id': t.taskId},
          h('td', {}, h('a', {href: '/tasks/' + enc(t.taskId), class: 'mono', title: t.taskId}, shortId(t.taskId)),
            t.fileName ? h('span', {class: 'muted small'}, ' ', t.fileName) : null),
          h('td', {}, t.stage), h('td', {class: 'num'}, dur((t.waitedSeconds || 0) * 1000)))))));
  }
  function rank(name) {
    const i = STEPS.findIndex((s) => name === 'task.' + s || name === s);
    if (i >= 0) return i;
    return name === 'task.dlq' ? 10 : name.includes('compensation') ? 11 : 20;
  }
  // drawChart draws time series as polylines in an SVG sized to its box:
  // a time axis over the window (or less, while there is less history)
  // and a y axis from 0 to a round maximum.
  function drawChart(svg, series, opts) {
    const W = Math.max(200, svg.clientWidth || 560);
    const H = Math.max(120, svg.clientHeight || 220);
    const L = 44, R = 10, T = 10, B = 22;
    svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
    const now = Date.now();
    const all = series.flatMap((s) => s.points);
    const t0 = Math.max(now - opts.window, Math.min(now - 5 * 60 * 1000, ...all.map((p) => p[0])));
    const max = niceMax(Math.max(opts.min || 1, ...all.map((p) => p[1])));
    const x = (t) => L + (t - t0) / (now - t0) * (W - L - R);
    const y = (v) => T + (1 - v / max) * (H - T - B);
    const kids = [];
    for (let i = 0; i <= 4; i++) {
      const v = max * i / 4;
      kids.push(h('line', {class: 'grid', x1: L, x2: W - R, y1: y(v), y2: y(v)}),
        h('text', {class: 'axis', x: L - 6, y: y(v) + 3, 'text-anchor': 'end'}, fmtAxis(v)));
    }
    for (let i = 0; i <= 3; i++) {
      const t = t0 + (now - t0) * i / 3;
      kids.push(h('text', {class: 'axis', x: x(t), y: H - 6, 'text-anchor': i === 0 ? 'start' : i === 3 ? 'end' : 'middle'},
        new Date(t).toLocaleTimeString([], {hour: '2-digit', minute: '2-digit'})));
    }
    for (const s of series) {
      const pts = s.points.filter((p) => p[0] >= t0).map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(' ');
      if (pts) kids.push(h('polyline', {points: pts, stroke: s.color, 'stroke-dasharray': s.dashed ? '4 3' : null}, h('title', {}, s.name)));
      const last = s.points[s.points.length - 1];
      if (last) kids.push(h('circle', {cx: x(last[0]).toFixed(1), cy: y(last[1]).toFixed(1), r: 2.5, fill: s.color}, h('title', {}, `${s.name}: ${last[1]}`)));
    }
    if (!all.length) kids.push(h('text', {class: 'axis', x: W / 2, y: H / 2, 'text-anchor': 'middle'}, 'no samples yet (one every 15 s)'));
    fill(svg, kids);
  }
  function niceMax(v) {
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 2.5, 5, 10]) if (v <= m * p) return m * p;
    return 10 * p;
  }
  function fmtAxis(v) { return v >= 1000 ? (v / 1000).toFixed(v >= 10000 ? 0 : 1) + 'k' : (Math.round(v * 100) / 100).toString(); }

  // ---- workers ----
  // Every worker process from its heartbeats (GET /api/workers), polled
  // every 3 s: what each consumer runs now, and how many runs it finished.
  async function pageWorkers(main, ctx) {
    const tbody = h('tbody', {id: 'workers-body'});
    const note = h('span', {class: 'muted', id: 'workers-note'});
    fill(main, h('div', {class: 'row', style: 'margin-bottom:12px'}, h('h1', {style: 'margin:0'}, 'Workers'), note),
      h('div', {class: 'tablebox'}, h('table', {id: 'workers'},
        h('colgroup', {}, h('col', {style: 'width:250px'}), h('col', {style: 'width:180px'}), h('col', {style: 'width:100px'}),
          h('col', {style: 'width:190px'}), h('col', {}), h('col', {style: 'width:140px'})),
        h('thead', {}, h('tr', {}, ['Worker', 'Host · pid · version', 'Status', 'Started · heartbeat', 'Running now', 'Done / failed'].map((c) => h('th', {}, c)))),
        tbody)));
    every(ctx, 3000, async () => {
      const data = await api(API.workers, {signal: ctx.signal});
      const ws = listOf(data, 'workers');
      const live = ws.filter((w) => w.status !== 'lost' && w.status !== 'stopped').length;
      note.textContent = `${live} live of ${ws.length} heard from in the last hour · heartbeat every ${pick(data, 'heartbeatSeconds') ?? '?'} s, lost after ${pick(data, 'lostAfterSeconds') ?? '?'} s`;
      fill(tbody, ws.length ? ws.map(workerRow) : h('tr', {class: 'empty'}, h('td', {colspan: 6}, 'No worker has sent a heartbeat in the last hour.')));
    });
  }
  function workerRow(w) {
    const running = listOf(w, 'running');
    return h('tr', {'data-id': w.id, 'data-status': w.status, 'data-service': w.service},
      h('td', {class: 'wrap'}, h('strong', {}, w.service), ' ', h('span', {class: 'muted'}, `(${(w.steps || []).join(', ')} · ${w.consumers} consumers)`), h('br'), copyable(w.id, 'mono small')),
      h('td', {class: 'wrap small'}, w.host, ' · ', w.pid, h('br'), h('span', {class: 'mono'}, w.version)),
      h('td', {}, badge(w.status)),
      h('td', {class: 'small'}, timeCell(w.startedAt), h('br'), h('span', {class: w.status === 'lost' ? 'bad' : 'muted'}, '♥ ', timeCell(w.heartbeatAt))),
      h('td', {class: 'wrap'}, running.length ? running.map((r) => h('div', {class: 'running'},
        h('a', {class: 'mono', href: '/tasks/' + enc(r.taskId), title: r.taskId}, shortId(r.taskId)), ' ', r.step,
        r.part ? h('span', {class: 'muted'}, ' part ' + r.part) : null, ' #' + r.attempt, ' · ', dur((r.elapsedSeconds || 0) * 1000)))
        : h('span', {class: 'muted'}, w.status === 'lost' || w.status === 'stopped' ? '—' : 'idle')),
      h('td', {class: 'num'}, `${w.done} / `, h('span', {class: w.failed ? 'bad' : ''}, w.failed)));
  }

  // ---- audit ----
  // Who did what (GET /api/audit), newest first, filtered by action and
  // actor, paged by cursor; the filters live in the URL.
  const AUDIT_ACTIONS = ['login', 'logout', 'refused', 'submit', 'cancel', 'retry', 'redub', 'replay', 'purge', 'requeue', 'pause', 'resume'];
  async function pageAudit(main, ctx) {
    const q = new URLSearchParams(location.search);
    const act = h('select', {id: 'audit-action', name: 'action', 'aria-label': 'action'},
      ['', ...AUDIT_ACTIONS].map((a) => h('option', {value: a, selected: a === (q.get('action') || '')}, a || 'every action')));
    const actor = h('input', {type: 'text', id: 'audit-actor', name: 'actor', value: q.get('actor') || '', placeholder: 'token name', size: 14});
    const target = h('input', {type: 'text', id: 'audit-target', name: 'target', value: q.get('target') || '', placeholder: 'task, dead letter or step', size: 24});
    const form = h('form', {class: 'row'}, act, actor, target, h('button', {type: 'submit'}, 'Filter'));
    const urlOf = (cursor) => {
      const p = new URLSearchParams();
      if (act.value) p.set('action', act.value);
      if (actor.value.trim()) p.set('actor', actor.value.trim());
      if (target.value.trim()) p.set('target', target.value.trim());
      if (cursor) p.set('cursor', cursor);
      return '/audit' + (p.toString() ? '?' + p : '');
    };
    form.addEventListener('submit', (ev) => { ev.preventDefault(); go(urlOf('')); });
    const tbody = h('tbody', {id: 'audit-body'});
    const pager = h('div', {class: 'pager'});
    fill(main, h('div', {class: 'row', style: 'margin-bottom:12px'}, h('h1', {style: 'margin:0'}, 'Audit'), form),
      h('div', {class: 'tablebox'}, h('table', {id: 'audit'},
        h('colgroup', {}, h('col', {style: 'width:120px'}), h('col', {style: 'width:130px'}), h('col', {style: 'width:90px'}),
          h('col', {style: 'width:200px'}), h('col', {style: 'width:260px'}), h('col', {})),
        h('thead', {}, h('tr', {}, ['When', 'Who', 'Action', 'Target', 'Outcome', 'Detail'].map((c) => h('th', {}, c)))),
        tbody)), pager);
    const params = new URLSearchParams(location.search);
    params.set('limit', '50');
    const data = await api(API.audit + '?' + params, {signal: ctx.signal});
    const entries = listOf(data, 'entries');
    fill(tbody, entries.length ? entries.map(auditRow) : h('tr', {class: 'empty'}, h('td', {colspan: 6}, 'Nothing recorded for this filter.')));
    const next = pick(data, 'nextCursor');
    fill(pager, h('button', {type: 'button', disabled: !q.get('cursor'), onclick: () => go(urlOf(''))}, '« Newest'),
      h('button', {type: 'button', id: 'audit-older', disabled: !next, onclick: () => go(urlOf(next))}, 'Older »'));
  }
  const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
  function auditRow(e) {
    const ok = e.outcome === 'ok';
    const t = e.target || '';
    const detail = e.detail && Object.keys(e.detail).length ? JSON.stringify(e.detail) : '';
    return h('tr', {'data-action': e.action},
      h('td', {}, timeCell(e.at)),
      h('td', {class: 'wrap'}, e.actor || h('span', {class: 'muted'}, '(unknown token)'), ' ', h('span', {class: 'muted small'}, e.role || '')),
      h('td', {}, e.action === 'refused' && e.detail && e.detail.count ? `refused ×${e.detail.count}` : e.action),
      h('td', {class: 'wrap mono small'}, UUID_RE.test(t) ? h('a', {href: '/tasks/' + enc(t), title: t}, t) : t || '—'),
      h('td', {class: 'wrap'}, ok ? badge('succeeded') : h('span', {class: 'bad'}, `${e.status} · ${e.outcome}`)),
      h('td', {class: 'wrap mono small'}, detail ? copyable(detail) : '—'));
  }

  // ---- waiting queue (read-only) ----
  // The dispatcher's queue is per project: the page lists every project
  // with people waiting or agents (longest wait first), shows the project
  // in ?project= (remembered for the next visit) and polls both.
  async function pageWaiting(main, ctx) {
    const project = new URLSearchParams(location.search).get('project') || localStorage.getItem('dubflow.project') || '';
    const input = h('input', {type: 'text', id: 'project', value: project, placeholder: 'project id (uuid)', size: 38, class: 'mono'});
    const form = h('form', {class: 'row'}, h('label', {class: 'inline', for: 'project'}, 'Project'), input, h('button', {type: 'submit'}, 'Show'));
    form.addEventListener('submit', (ev) => { ev.preventDefault(); go('/waiting?project=' + enc(input.value.trim())); });
    const summary = h('div', {class: 'grid4', id: 'waiting-summary', style: 'margin:12px 0 16px'});
    const tbody = h('tbody', {id: 'waiting-body'});
    const agents = h('tbody', {id: 'agents-body'});
    const projects = h('tbody', {id: 'projects-body'});
    fill(main, h('div', {class: 'row', style: 'margin-bottom:12px'}, h('h1', {style: 'margin:0'}, 'Waiting queue'), form,
      h('span', {class: 'spacer'}), h('span', {class: 'muted'}, 'read-only · refreshed every 5 s')),
    h('div', {class: 'panel'}, h('h2', {}, 'Every project, longest wait first'), h('div', {class: 'tablebox', style: 'max-height:260px;overflow:auto'},
      h('table', {id: 'projects'},
        h('colgroup', {}, h('col', {}), h('col', {style: 'width:90px'}), h('col', {style: 'width:130px'}), h('col', {style: 'width:90px'}),
          h('col', {style: 'width:110px'}), h('col', {style: 'width:110px'})),
        h('thead', {}, h('tr', {}, ['Project', 'Waiting', 'Longest wait', 'Agents', 'Available', 'Free capacity'].map((c) => h('th', {}, c)))),
        projects))),
    summary,
    h('div', {class: 'panel'}, h('h2', {}, 'Waiting, in the order they will be served'), h('div', {class: 'tablebox'}, h('table', {id: 'waiting'},
      h('colgroup', {}, h('col', {style: 'width:60px'}), h('col', {}), h('col', {style: 'width:110px'}), h('col', {style: 'width:100px'}),
        h('col', {style: 'width:110px'}), h('col', {style: 'width:120px'}), h('col', {})),
      h('thead', {}, h('tr', {}, ['#', 'Visitor', 'Source', 'Urgency', 'Status', 'Entered', 'Agent'].map((c) => h('th', {}, c)))),
      tbody))),
    h('div', {class: 'panel'}, h('h2', {}, 'Agents'), h('div', {class: 'tablebox'}, h('table', {id: 'agents'},
      h('thead', {}, h('tr', {}, ['Agent', 'Availability', 'Load', 'Free', 'Idle since'].map((c) => h('th', {}, c)))), agents))));
    const empty = (body, n, text) => fill(body, h('tr', {class: 'empty'}, h('td', {colspan: n}, text)));
    every(ctx, 5000, async () => {
      const [list, st] = await Promise.all([
        // 503: no dispatcher configured; said in the table, not flashed every 5 s.
        api(API.waitingProjects, {signal: ctx.signal}).catch((e) => { if (e.status === 503) return {unavailable: e.message}; throw e; }),
        project ? api(API.waiting(project), {signal: ctx.signal}) : null,
      ]);
      if (list && list.unavailable) empty(projects, 6, list.unavailable);
      else showProjects(projects, listOf(list, 'projects'), project);
      if (st) showWaiting(summary, tbody, agents, st);
    });
    if (!project) { empty(tbody, 7, 'Pick a project above or enter its id.'); empty(agents, 5, '—'); return; }
    localStorage.setItem('dubflow.project', project);
  }
  function showProjects(tbody, list, current) {
    fill(tbody, list.length ? list.map((p) => {
      const id = pick(p, 'project_id');
      return h('tr', {class: id === current ? 'on' : '', 'data-project': id},
        h('td', {class: 'mono'}, h('a', {href: '/waiting?project=' + enc(id)}, id)),
        h('td', {class: 'num'}, pick(p, 'waiting') ?? 0),
        h('td', {class: 'num'}, pick(p, 'waiting') ? dur((pick(p, 'longest_wait_seconds') ?? 0) * 1000) : '—'),
        h('td', {class: 'num'}, pick(p, 'agents') ?? 0),
        h('td', {class: 'num'}, pick(p, 'available_agents') ?? 0),
        h('td', {class: 'num'}, pick(p, 'free_capacity') ?? 0));
    }) : h('tr', {class: 'empty'}, h('td', {colspan: 6}, 'No project has anyone waiting or any agent.')));
  }
  function showWaiting(summary, tbody, agents, st) {
    const stat = (label, value) => h('div', {class: 'panel', style: 'margin:0'}, h('div', {class: 'muted'}, label), h('div', {class: 'stat'}, value));
    const byPrio = Object.entries(pick(st, 'waiting_by_priority') || {}).map(([k, v]) => `${k} ${v}`).join(' · ');
    fill(summary, stat('Waiting', pick(st, 'waiting') ?? 0), stat('Longest wait', dur((pick(st, 'longest_wait_seconds') ?? 0) * 1000)),
      stat('Agents available', pick(st, 'available_agents') ?? 0), stat('Free capacity', pick(st, 'free_capacity') ?? 0));
    summary.firstChild.append(h('div', {class: 'muted'}, byPrio || ' '));
    const entries = pick(st, 'entries') || [];
    fill(tbody, entries.length ? entries.map((e, i) => h('tr', {},
      h('td', {class: 'num'}, pick(e, 'position') || i + 1),
      h('td', {class: 'mono', title: pick(e, 'visitor_message') || ''}, pick(e, 'visitor_id') || '—'),
      h('td', {}, pick(e, 'source') || '—'),
      h('td', {}, pick(e, 'urgency') || '—'),
      h('td', {}, badge(pick(e, 'status'))),
      h('td', {}, timeCell(pick(e, 'entered_at', 'created_at'))),
      h('td', {class: 'mono'}, pick(e, 'assigned_staff_id') || '—')))
      : h('tr', {class: 'empty'}, h('td', {colspan: 7}, 'Nobody is waiting.')));
    const list = pick(st, 'agents') || [];
    fill(agents, list.length ? list.map((a) => h('tr', {},
      h('td', {class: 'mono'}, pick(a, 'staff_id', 'id')), h('td', {}, pick(a, 'availability')),
      h('td', {class: 'num'}, `${pick(a, 'current_load') ?? 0} / ${pick(a, 'max_concurrent') ?? 0}`),
      h('td', {class: 'num'}, pick(a, 'free_capacity') ?? 0), h('td', {}, timeCell(pick(a, 'idle_since')))))
      : h('tr', {class: 'empty'}, h('td', {colspan: 5}, 'No agents.')));
  }

  route(/^\/login$/, 'login', pageLogin);
  route(/^\/(?:tasks)?$/, 'tasks', pageTasks);
  route(/^\/tasks\/([^/]+)$/, 'tasks', pageTask);
  route(/^\/upload$/, 'upload', pageUpload);
  route(/^\/dead-letters$/, 'dead-letters', pageDeadLetters);
  route(/^\/compensation$/, 'compensation', pageCompensation);
  route(/^\/health$/, 'health', pageHealth);
  route(/^\/waiting$/, 'waiting', pageWaiting);
  route(/^\/workers$/, 'workers', pageWorkers);
  route(/^\/audit$/, 'audit', pageAudit);

  $('#logout').addEventListener('click', async () => {
    try { await api(API.logout, {method: 'POST'}); } catch (e) { if (e.status !== 401) report(e); }
    sessionStorage.removeItem('dubflow.csrf');
    forgetSession();
    go('/login', true);
  });
  render();
})();
