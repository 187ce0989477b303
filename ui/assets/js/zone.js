// Wall times in a time zone (IANA name), for the timeline's axis: the parts of an instant, and
// the instant of a wall time (two rounds of offset correction, enough away from a transition;
// at one, a tick lands an hour off, which an axis can bear).
const cache = new Map();
function fmt(zone) {
  if (!cache.has(zone)) {
    cache.set(zone, new Intl.DateTimeFormat('en-US', { timeZone: zone, hourCycle: 'h23',
      year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric' }));
  }
  return cache.get(zone);
}

export function parts(ms, zone) {
  const o = {};
  for (const p of fmt(zone).formatToParts(new Date(ms))) if (p.type !== 'literal') o[p.type] = Number(p.value);
  return { y: o.year, mo: o.month, d: o.day, h: o.hour % 24, mi: o.minute, s: o.second };
}

function offset(ms, zone) {
  const p = parts(ms, zone);
  return Date.UTC(p.y, p.mo - 1, p.d, p.h, p.mi, p.s) - Math.floor(ms / 1000) * 1000;
}

export function fromWall(y, mo, d, h, zone) {
  const guess = Date.UTC(y, mo - 1, d, h);
  let t = guess - offset(guess, zone);
  t = guess - offset(t, zone);
  return t;
}

// A datetime-local input's value ("2026-09-01T00:00") read in zone, as epoch ms.
export function parseLocal(value, zone) {
  const m = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2}))?/.exec(value || '');
  if (!m) return NaN;
  const base = fromWall(+m[1], +m[2], +m[3], +(m[4] || 0), zone);
  return base + (+(m[5] || 0)) * 60000;
}

// Epoch ms as a datetime-local value in zone.
export function toLocal(ms, zone) {
  const p = parts(ms, zone);
  const two = (n) => String(n).padStart(2, '0');
  return `${p.y}-${two(p.mo)}-${two(p.d)}T${two(p.h)}:${two(p.mi)}`;
}
