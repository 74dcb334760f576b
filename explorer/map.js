/**
 * The points of a page drawn on a plain SVG plot: an equirectangular projection of the points'
 * bounding box (longitude scaled by the cosine of the middle latitude, so distances look right),
 * a graticule, one circle per point and, when the query has one, the `geo.distance` center as a
 * cross. No tiles: the page reaches nothing but the service.
 */

const SVG = 'http://www.w3.org/2000/svg';
const WIDTH = 640;
const HEIGHT = 400;
const PAD = 24;

/** `{ lon, lat, label }` of every record with a GeoJSON point (any property) or Latitude and Longitude. */
export function pointsOf(records) {
  const points = [];
  for (const record of records) {
    if (record === null || typeof record !== 'object') continue;
    const label = String(record.ListingKey ?? record.UnparsedAddress ?? Object.values(record)[0] ?? '');
    let point = null;
    for (const value of Object.values(record)) {
      if (value && value.type === 'Point' && Array.isArray(value.coordinates) && value.coordinates.length >= 2) {
        point = { lon: Number(value.coordinates[0]), lat: Number(value.coordinates[1]) };
        break;
      }
    }
    if (point === null && typeof record.Latitude === 'number' && typeof record.Longitude === 'number') point = { lon: record.Longitude, lat: record.Latitude };
    if (point !== null && Number.isFinite(point.lon) && Number.isFinite(point.lat)) points.push({ ...point, label });
  }
  return points;
}

/** The center of a `geo.distance(..., geography'POINT(lon lat)')` in a filter, or null. */
export function centerOf(filter) {
  const m = /geography'POINT\(\s*(-?[\d.]+)\s+(-?[\d.]+)\s*\)'/i.exec(filter);
  return m ? { lon: Number(m[1]), lat: Number(m[2]) } : null;
}

function el(name, attrs, text) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

/** A tidy step for grid lines across a span of degrees. */
function stepOf(span) {
  const raw = span / 5;
  const p = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw) ?? raw;
}

/** Draws the points (and the center) into the svg element, replacing what was there. */
export function drawMap(svg, points, center) {
  svg.replaceChildren();
  const all = center ? [...points, center] : points;
  let [w, e, s, n] = [Infinity, -Infinity, Infinity, -Infinity];
  for (const p of all) {
    w = Math.min(w, p.lon);
    e = Math.max(e, p.lon);
    s = Math.min(s, p.lat);
    n = Math.max(n, p.lat);
  }
  // at least ~1 km across, so one point is not a division by zero
  const minSpan = 0.01;
  if (e - w < minSpan) [w, e] = [(w + e) / 2 - minSpan / 2, (w + e) / 2 + minSpan / 2];
  if (n - s < minSpan) [s, n] = [(s + n) / 2 - minSpan / 2, (s + n) / 2 + minSpan / 2];
  const k = Math.cos((((s + n) / 2) * Math.PI) / 180);
  const scale = Math.min((WIDTH - 2 * PAD) / ((e - w) * k), (HEIGHT - 2 * PAD) / (n - s));
  const x0 = WIDTH / 2 - ((w + e) / 2) * k * scale;
  const y0 = HEIGHT / 2 + ((s + n) / 2) * scale;
  const x = (lon) => x0 + lon * k * scale;
  const y = (lat) => y0 - lat * scale;

  const grid = el('g', {});
  const lonStep = stepOf(e - w);
  for (let lon = Math.ceil(w / lonStep) * lonStep; lon <= e; lon += lonStep) {
    grid.append(el('line', { class: 'grid', x1: x(lon), x2: x(lon), y1: 0, y2: HEIGHT }));
    grid.append(el('text', { class: 'grid-label', x: x(lon) + 2, y: HEIGHT - 4 }, lon.toFixed(3)));
  }
  const latStep = stepOf(n - s);
  for (let lat = Math.ceil(s / latStep) * latStep; lat <= n; lat += latStep) {
    grid.append(el('line', { class: 'grid', x1: 0, x2: WIDTH, y1: y(lat), y2: y(lat) }));
    grid.append(el('text', { class: 'grid-label', x: 2, y: y(lat) - 2 }, lat.toFixed(3)));
  }
  svg.append(grid);
  const dots = el('g', {});
  for (const p of points) {
    const c = el('circle', { cx: x(p.lon).toFixed(1), cy: y(p.lat).toFixed(1), r: 5 });
    c.append(el('title', {}, `${p.label} (${p.lon}, ${p.lat})`));
    dots.append(c);
  }
  svg.append(dots);
  if (center) {
    const cx = x(center.lon);
    const cy = y(center.lat);
    svg.append(el('path', { class: 'center', d: `M${cx - 8} ${cy}H${cx + 8}M${cx} ${cy - 8}V${cy + 8}` }));
  }
}
