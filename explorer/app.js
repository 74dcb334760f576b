/**
 * The explorer page: sign in, pick a resource, build or type a query, and see its rows (table,
 * JSON), the total count, the next page, the plan and, for points, a map. Everything is drawn
 * with DOM calls (textContent, never HTML from the data) and every request goes to this origin.
 */
import { ApiError, get, signIn } from './api.js';
import { drawMap, centerOf, pointsOf } from './map.js';
import { kindOf, parseMetadata } from './metadata.js';
import { addCondition, condition, EXAMPLES, OPERATORS, optionOf, placeholderOf, queryString, setOption } from './query.js';

const $ = (id) => document.getElementById(id);

const state = {
  token: null,
  /** @type {import('./metadata.js').EntitySet[]} */
  sets: [],
  /** The resource and query text of the rows shown, and how many rows came before this page. */
  shown: null,
  offset: 0,
  nextLink: null,
};

function show(id, visible) {
  $(id).hidden = !visible;
}

function option(value, label = value) {
  const o = document.createElement('option');
  o.value = value;
  o.textContent = label;
  return o;
}

/** The service's error object in a box: code, message, the option it is about and where in it. */
function renderError(box, err, text) {
  box.replaceChildren();
  const e = err instanceof ApiError ? err.error : { code: 'Error', message: err instanceof Error ? err.message : String(err) };
  const code = document.createElement('span');
  code.className = 'code';
  code.textContent = e.code;
  const message = document.createElement('span');
  message.className = 'message';
  message.textContent = ` ${e.message}`;
  box.append(code, message);
  if (e.target !== undefined) {
    const where = document.createElement('div');
    where.className = 'target';
    where.textContent = `in ${e.target}${e.position !== undefined ? ` at position ${e.position}` : ''}`;
    box.append(where);
    const value = text === undefined ? '' : optionOf(text, e.target);
    if (value !== '' && e.position !== undefined) {
      const pre = document.createElement('pre');
      pre.className = 'caret';
      pre.textContent = `${value}\n${' '.repeat(Math.min(e.position, value.length))}^`;
      box.append(pre);
    }
  }
  for (const d of e.details ?? []) {
    const line = document.createElement('div');
    line.textContent = `${d.code}: ${d.message}${d.target ? ` (${d.target})` : ''}`;
    box.append(line);
  }
  box.hidden = false;
}

/** A token the service no longer takes: back to the sign-in form, saying why. */
function expired(err) {
  if (!(err instanceof ApiError) || err.status !== 401) return false;
  signOut();
  renderError($('sign-in-error'), err);
  return true;
}

function signOut() {
  state.token = null;
  state.shown = null;
  show('who', false);
  show('explore', false);
  show('results', false);
  show('sign-in', true);
}

async function onSignIn(event) {
  event.preventDefault();
  const box = $('sign-in-error');
  box.hidden = true;
  $('sign-in-button').disabled = true;
  try {
    const username = $('username').value.trim();
    const token = await signIn(username, $('password').value);
    const [resources, xml] = await Promise.all([get('v1/account/resources', token), get('v1/listings/data/$metadata', token, { as: 'text' })]);
    state.token = token;
    state.sets = parseMetadata(xml);
    $('password').value = '';
    $('who-name').textContent = username;
    const sources = (resources?.resources?.listings ?? []).map((l) => l.originating_system_name);
    $('who-sources').textContent = sources.length ? `(sources ${sources.join(', ')})` : '';
    const select = $('resource');
    select.replaceChildren(...state.sets.map((s) => option(s.name)));
    select.value = state.sets.some((s) => s.name === 'Property') ? 'Property' : state.sets[0].name;
    onResource();
    show('sign-in', false);
    show('who', true);
    show('explore', true);
  } catch (err) {
    renderError(box, err);
  } finally {
    $('sign-in-button').disabled = false;
  }
}

function currentSet() {
  return state.sets.find((s) => s.name === $('resource').value) ?? state.sets[0];
}

/** A new resource: the builder's fields and the examples for it, and a fresh query. */
function onResource() {
  const set = currentSet();
  $('cond-field').replaceChildren(
    ...set.fields.map((f) => option(f.name, `${f.name} (${f.type.replace(/^Edm\./, '').replace('Collection(Edm.', 'Collection(')})`)),
  );
  $('select-fields').replaceChildren(...set.fields.map((f) => option(f.name)));
  $('order-field').replaceChildren(option('', '(none)'), ...set.fields.filter((f) => !f.type.startsWith('Collection(')).map((f) => option(f.name)));
  $('example').replaceChildren(
    option('', '(choose one)'),
    ...EXAMPLES.map((x, i) => (x.resource === set.name ? option(String(i), x.label) : null)).filter(Boolean),
  );
  $('top').value = '';
  $('count').checked = true;
  $('query').value = '$count=true';
  onField();
}

function fieldKind() {
  const f = currentSet().fields.find((x) => x.name === $('cond-field').value);
  return f ? kindOf(f.type) : 'other';
}

function onField() {
  const kind = fieldKind();
  $('cond-op').replaceChildren(...OPERATORS[kind].map((op) => option(op)));
  $('cond-value').placeholder = placeholderOf(kind, $('cond-op').value);
}

function onAddCondition() {
  const cond = condition($('cond-field').value, fieldKind(), $('cond-op').value, $('cond-value').value);
  if (cond instanceof Error) {
    renderError($('error'), cond);
    show('results', true);
    return;
  }
  $('query').value = addCondition($('query').value, cond);
}

/** The option one builder control stands for, written into the query text (the other options stay as typed). */
const BUILDER_OPTIONS = {
  'select-fields': () => ['$select', [...$('select-fields').selectedOptions].map((o) => o.value).join(',')],
  'order-field': () => ['$orderby', $('order-field').value && `${$('order-field').value} ${$('order-dir').value}`],
  'order-dir': () => BUILDER_OPTIONS['order-field'](),
  top: () => ['$top', $('top').value],
  count: () => ['$count', $('count').checked ? 'true' : ''],
};

function onBuilderOption(event) {
  const [name, value] = BUILDER_OPTIONS[event.currentTarget.id]();
  $('query').value = setOption($('query').value, name, value);
}

function onExample() {
  const example = EXAMPLES[Number($('example').value)];
  if ($('example').value === '' || example === undefined) return;
  $('query').value = example.text;
  // the builder's $select and $orderby would otherwise show what the text no longer says
  for (const o of $('select-fields').options) o.selected = false;
  $('order-field').value = '';
  $('count').checked = optionOf(example.text, '$count') === 'true';
  $('top').value = optionOf(example.text, '$top');
}

/** Runs the query from its first page; the plan is asked for beside it. */
async function onRun() {
  const resource = currentSet().name;
  const text = $('query').value;
  const qs = queryString(text);
  const path = `v1/listings/data/${resource}${qs ? `?${qs}` : ''}`;
  $('request-line').textContent = `GET /${path}`;
  state.shown = { resource, text };
  state.offset = 0;
  $('plan').textContent = '';
  const plan = get(`v1/listings/explain/${resource}${qs ? `?${qs}` : ''}`, state.token).then(
    (p) => ($('plan').textContent = p.plan),
    (err) => ($('plan').textContent = err instanceof ApiError ? `${err.error.code}: ${err.error.message}` : String(err)),
  );
  await Promise.all([load(path), plan]);
}

async function onNext() {
  if (state.nextLink === null) return;
  await load(new URL(state.nextLink));
}

/** One page: fetched, then drawn (or its error shown). */
async function load(target) {
  const run = $('run');
  const next = $('next');
  run.disabled = true;
  next.disabled = true;
  show('results', true);
  $('error').hidden = true;
  try {
    const page = await get(target, state.token);
    render(page);
  } catch (err) {
    if (expired(err)) return;
    state.nextLink = null;
    renderError($('error'), err, state.shown?.text);
    $('summary').textContent = '';
    $('rows').replaceChildren();
    $('json').textContent = err instanceof ApiError ? JSON.stringify({ error: err.error }, null, 2) : String(err);
    show('map-figure', false);
  } finally {
    run.disabled = false;
    next.disabled = state.nextLink === null;
  }
}

function render(page) {
  const records = Array.isArray(page.value) ? page.value : [page];
  const from = state.offset + 1;
  const to = state.offset + records.length;
  const total = page['@odata.count'];
  const parts = [`${state.shown.resource}:`, records.length ? `rows ${from}–${to}` : 'no rows'];
  if (typeof total === 'number') parts.push(`of ${total} (@odata.count)`);
  if (page['@odata.nextLink']) parts.push('· more on the next page');
  $('summary').textContent = parts.join(' ');
  state.offset = to;
  state.nextLink = typeof page['@odata.nextLink'] === 'string' ? page['@odata.nextLink'] : null;
  $('json').textContent = JSON.stringify(page, null, 2);
  renderTable(records);
  const points = pointsOf(records);
  if (points.length > 0) {
    drawMap($('map'), points, centerOf(optionOf(state.shown.text, '$filter')));
    $('map-caption').textContent = `${points.length} point${points.length === 1 ? '' : 's'} of this page`;
  }
  show('map-figure', points.length > 0);
}

function cellText(value) {
  if (value === null || value === undefined) return '';
  if (typeof value === 'object')
    return value.type === 'Point' && Array.isArray(value.coordinates) ? `POINT(${value.coordinates.join(' ')})` : JSON.stringify(value);
  return String(value);
}

function renderTable(records) {
  const columns = [];
  const seen = new Set();
  for (const r of records) {
    for (const k of Object.keys(r ?? {})) {
      if (!seen.has(k) && !k.includes('@odata.')) {
        seen.add(k);
        columns.push(k);
      }
    }
  }
  const head = document.createElement('tr');
  for (const c of columns) {
    const th = document.createElement('th');
    th.textContent = c;
    head.append(th);
  }
  const rows = records.map((r) => {
    const tr = document.createElement('tr');
    for (const c of columns) {
      const td = document.createElement('td');
      const value = r?.[c];
      td.textContent = cellText(value);
      td.title = td.textContent;
      if (value === null || value === undefined) td.className = 'null';
      else if (typeof value === 'number') td.className = 'number';
      tr.append(td);
    }
    return tr;
  });
  const thead = document.createElement('thead');
  thead.append(head);
  const tbody = document.createElement('tbody');
  tbody.append(...rows);
  $('rows').replaceChildren(thead, tbody);
}

function onTab(event) {
  for (const tab of document.querySelectorAll('[role=tab]')) {
    const selected = tab === event.currentTarget;
    tab.setAttribute('aria-selected', String(selected));
    $(tab.getAttribute('aria-controls')).hidden = !selected;
  }
}

function report(promise) {
  promise.catch((err) => renderError($('error'), err));
}

$('sign-in-form').addEventListener('submit', (e) => report(onSignIn(e)));
$('sign-out').addEventListener('click', signOut);
$('resource').addEventListener('change', onResource);
$('cond-field').addEventListener('change', onField);
$('cond-op').addEventListener('change', () => ($('cond-value').placeholder = placeholderOf(fieldKind(), $('cond-op').value)));
$('cond-add').addEventListener('click', onAddCondition);
for (const id of Object.keys(BUILDER_OPTIONS)) $(id).addEventListener('change', onBuilderOption);
$('example').addEventListener('change', onExample);
$('run').addEventListener('click', () => report(onRun()));
$('next').addEventListener('click', () => report(onNext()));
$('query').addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) report(onRun());
});
for (const tab of document.querySelectorAll('[role=tab]')) tab.addEventListener('click', onTab);
document.body.dataset.ready = 'true';
