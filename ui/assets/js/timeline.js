// The segment timeline of a model, drawn on a canvas: one bar per segment on a time axis in the
// project's zone, NEW ones hatched and WARNING ones dotted (never colour alone), labelled when
// there is room; a refresh's or merge's NEW segment sits in a lane above its sources; holes
// between segments are marked in the gap row. Zoom (years to hours) and pan by buttons, wheel,
// drag and keys. Canvas because 10,000 bars draw in milliseconds where as many SVG nodes take
// far longer to lay out; what a screen reader needs is in the table and panel beside it.
import { parts, fromWall } from './zone.js';

const HOUR = 3600e3, DAY = 24 * HOUR;
export const SPANS = { All: 0, '10 years': 3653 * DAY, Year: 366 * DAY, Month: 31 * DAY, Week: 7 * DAY, Day: DAY, Hour: HOUR };
const COLORS = { READY: '#2e7d32', WARNING: '#b26a00', NEW: '#1565c0' };
const LANE_H = 34, LANE_GAP = 8, GAP_ROW = 14, AXIS_H = 34, TOP = 8, MAX_LANES = 4;

function pattern(ctx, color, kind) {
  const c = document.createElement('canvas');
  c.width = c.height = 8;
  const g = c.getContext('2d');
  g.fillStyle = color;
  g.globalAlpha = kind === 'hatch' ? 0.35 : 1;
  g.fillRect(0, 0, 8, 8);
  g.globalAlpha = 1;
  g.strokeStyle = kind === 'hatch' ? color : '#fff';
  g.fillStyle = '#fff';
  if (kind === 'hatch') {
    g.lineWidth = 2;
    g.beginPath(); g.moveTo(0, 8); g.lineTo(8, 0); g.moveTo(-2, 2); g.lineTo(2, -2); g.moveTo(6, 10); g.lineTo(10, 6); g.stroke();
  } else if (kind === 'dots') {
    g.beginPath(); g.arc(2, 2, 1.3, 0, 7); g.arc(6, 6, 1.3, 0, 7); g.fill();
  }
  return ctx.createPattern(c, 'repeat');
}

// A legend swatch drawn like the bars.
export function swatch(status) {
  const c = document.createElement('canvas');
  c.width = 28; c.height = 14;
  const g = c.getContext('2d');
  if (status === 'GAP') { g.fillStyle = '#c62828'; g.fillRect(0, 4, 28, 6); return c; }
  g.fillStyle = status === 'NEW' ? pattern(g, COLORS.NEW, 'hatch') : status === 'WARNING' ? pattern(g, COLORS.WARNING, 'dots') : COLORS.READY;
  g.fillRect(0, 0, 28, 14);
  return c;
}

export class Timeline {
  constructor(canvas, { zone, onHover, onSelect, onView }) {
    this.canvas = canvas;
    this.ctx = canvas.getContext('2d');
    this.zone = zone || 'UTC';
    this.onHover = onHover || (() => {});
    this.onSelect = onSelect || (() => {});
    this.onView = onView || (() => {});
    this.segs = [];
    this.gaps = [];
    this.selected = new Set();
    this.cursor = -1;
    this.hover = -1;
    this.t0 = 0; this.t1 = 1;
    this.lastRenderMs = 0;
    this.fills = {
      READY: COLORS.READY,
      WARNING: pattern(this.ctx, COLORS.WARNING, 'dots'),
      NEW: pattern(this.ctx, COLORS.NEW, 'hatch'),
    };
    this.bind();
  }

  // segments: the model's segments ({id, status, start, end, ...}). Keeps the view unless fit.
  setData(segments, fit) {
    const t = performance.now();
    this.segs = segments.slice().sort((a, b) => a.start - b.start || a.end - b.end);
    const laneEnd = [];
    this.maxLen = 0;
    for (const s of this.segs) {
      let lane = laneEnd.findIndex((e) => e <= s.start);
      if (lane < 0) lane = Math.min(laneEnd.length, MAX_LANES - 1);
      laneEnd[lane] = Math.max(laneEnd[lane] || 0, s.end);
      s.lane = lane;
      this.maxLen = Math.max(this.maxLen, s.end - s.start);
    }
    this.lanes = Math.max(1, laneEnd.length);
    this.gaps = [];
    let covered = -Infinity;
    for (const s of this.segs) {
      if (covered !== -Infinity && s.start > covered) this.gaps.push({ start: covered, end: s.start });
      covered = Math.max(covered, s.end);
    }
    const ids = new Set(this.segs.map((s) => s.id));
    for (const id of this.selected) if (!ids.has(id)) this.selected.delete(id);
    if (fit || this.t1 <= this.t0 + 1) this.fit();
    this.layoutMs = performance.now() - t;
    this.render();
  }

  fit() {
    if (!this.segs.length) { const now = Date.now(); this.setView(now - 30 * DAY, now + DAY); return; }
    const lo = this.segs[0].start, hi = Math.max(...this.segs.map((s) => s.end));
    const pad = Math.max((hi - lo) * 0.02, HOUR);
    this.setView(lo - pad, hi + pad);
  }

  setView(t0, t1) {
    const span = Math.min(Math.max(t1 - t0, 10 * 60e3), 400 * 366 * DAY);
    const mid = (t0 + t1) / 2;
    this.t0 = mid - span / 2;
    this.t1 = mid + span / 2;
    this.onView(this.t0, this.t1);
  }

  zoomTo(span, center) {
    if (!span) { this.fit(); this.render(); return; }
    const c = center ?? (this.t0 + this.t1) / 2;
    this.setView(c - span / 2, c + span / 2);
    this.render();
  }

  zoom(factor, atX) {
    const w = this.canvas.clientWidth || 1;
    const t = this.t0 + (this.t1 - this.t0) * ((atX ?? w / 2) / w);
    const s0 = (this.t1 - this.t0) * factor;
    const frac = (t - this.t0) / (this.t1 - this.t0);
    this.setView(t - s0 * frac, t + s0 * (1 - frac));
    this.render();
  }

  pan(frac) {
    const d = (this.t1 - this.t0) * frac;
    this.setView(this.t0 + d, this.t1 + d);
    this.render();
  }

  x(t, w) { return ((t - this.t0) / (this.t1 - this.t0)) * w; }
  laneY(lane) { return TOP + (this.lanes - 1 - lane) * (LANE_H + LANE_GAP); }
  gapY() { return TOP + this.lanes * (LANE_H + LANE_GAP); }

  // First segment index whose start could reach t (starts are sorted; no bar is longer than maxLen).
  firstFrom(t) {
    let lo = 0, hi = this.segs.length;
    const k = t - this.maxLen;
    while (lo < hi) { const m = (lo + hi) >> 1; if (this.segs[m].start < k) lo = m + 1; else hi = m; }
    return lo;
  }

  render() {
    const t = performance.now();
    const c = this.canvas, ctx = this.ctx;
    const dpr = window.devicePixelRatio || 1;
    const w = c.clientWidth, hgt = this.gapY() + GAP_ROW + AXIS_H;
    if (c.style.height !== `${hgt}px`) c.style.height = `${hgt}px`;
    if (c.width !== Math.round(w * dpr) || c.height !== Math.round(hgt * dpr)) {
      c.width = Math.round(w * dpr); c.height = Math.round(hgt * dpr);
    }
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, hgt);
    this.drawAxis(ctx, w, hgt);
    ctx.font = '12px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    let drawn = 0;
    const thin = []; // bars under 4 px that are not READY: drawn after, solid and 3 px wide
    for (let i = this.firstFrom(this.t0); i < this.segs.length; i++) {
      const s = this.segs[i];
      if (s.start >= this.t1) break;
      if (s.end <= this.t0) continue;
      const x1 = Math.max(this.x(s.start, w), -2), x2 = Math.min(this.x(s.end, w), w + 2);
      const y = this.laneY(s.lane);
      const bw = Math.max(x2 - x1, 1);
      if (bw < 4 && s.status !== 'READY') thin.push([s, x1, y]);
      ctx.fillStyle = this.fills[s.status] || '#888';
      ctx.fillRect(x1, y, bw, LANE_H);
      if (bw > 5) { ctx.fillStyle = '#fff'; ctx.fillRect(x2 - 1, y, 1, LANE_H); }
      if (bw > 16) this.label(ctx, s, x1, bw, y);
      drawn++;
    }
    for (const [s, x1, y] of thin) { ctx.fillStyle = COLORS[s.status] || '#888'; ctx.fillRect(x1 - 1, y, 3, LANE_H); }
    ctx.fillStyle = '#c62828';
    const gy = this.gapY() + 3;
    for (const g of this.gaps) {
      if (g.end <= this.t0 || g.start >= this.t1) continue;
      const x1 = this.x(g.start, w), x2 = this.x(g.end, w);
      ctx.fillRect(x1, gy, Math.max(x2 - x1, 2), GAP_ROW - 6);
      if (x2 - x1 > 40) { ctx.fillStyle = '#fff'; ctx.font = '10px system-ui, sans-serif'; ctx.fillText('gap', x1 + 3, gy + 4); ctx.fillStyle = '#c62828'; }
    }
    this.outline(ctx, w);
    this.drawn = drawn;
    this.lastRenderMs = performance.now() - t;
    c.dataset.renderMs = this.lastRenderMs.toFixed(2);
    c.dataset.drawn = String(drawn);
    performance.mark('qilin:timeline-rendered');
  }

  label(ctx, s, x1, bw, y) {
    ctx.save();
    ctx.beginPath(); ctx.rect(x1, y, bw, LANE_H); ctx.clip();
    if (bw > 150 && (!s.day || s.dayZone !== this.zone)) {
      const p = parts(s.start, this.zone);
      s.day = `${p.y}-${String(p.mo).padStart(2, '0')}-${String(p.d).padStart(2, '0')}`;
      s.dayZone = this.zone;
    }
    // Room decides: status and date, the status, or its letter (the legend gives the letters).
    const text = bw > 150 ? `${s.status} ${s.day}` : bw > 70 ? s.status : s.status[0];
    ctx.fillStyle = '#fff';
    ctx.fillRect(x1 + 3, y + 9, ctx.measureText(text).width + 6, 16);
    ctx.fillStyle = '#111';
    ctx.fillText(text, x1 + 6, y + LANE_H / 2);
    ctx.restore();
  }

  outline(ctx, w) {
    const mark = (i, color, width) => {
      const s = this.segs[i];
      if (!s || s.end <= this.t0 || s.start >= this.t1) return;
      const x1 = this.x(s.start, w), x2 = this.x(s.end, w);
      ctx.strokeStyle = color; ctx.lineWidth = width;
      ctx.strokeRect(Math.max(x1, 0) + 1, this.laneY(s.lane) - 2, Math.max(x2 - x1, 3) - 2, LANE_H + 4);
    };
    this.segs.forEach((s, i) => { if (this.selected.has(s.id)) mark(i, '#111', 3); });
    if (this.cursor >= 0) mark(this.cursor, '#f0a500', 2);
    if (this.hover >= 0) mark(this.hover, '#555', 1);
  }

  drawAxis(ctx, w, hgt) {
    const y = hgt - AXIS_H;
    ctx.strokeStyle = '#999'; ctx.fillStyle = '#333'; ctx.lineWidth = 1;
    ctx.beginPath(); ctx.moveTo(0, y + 0.5); ctx.lineTo(w, y + 0.5); ctx.stroke();
    ctx.font = '11px system-ui, sans-serif';
    ctx.textBaseline = 'top';
    const span = this.t1 - this.t0;
    const steps = [[HOUR, 'h'], [3 * HOUR, 'h'], [6 * HOUR, 'h'], [12 * HOUR, 'h'], [DAY, 'd'], [7 * DAY, 'd'],
      [31 * DAY, 'mo'], [92 * DAY, 'mo'], [366 * DAY, 'y'], [5 * 366 * DAY, 'y'], [10 * 366 * DAY, 'y'], [50 * 366 * DAY, 'y']];
    const minPx = w < 500 ? 70 : 90;
    const [step, unit] = steps.find(([s]) => (s / span) * w >= minPx) || steps[steps.length - 1];
    let n = 0;
    for (const t of this.ticks(step, unit)) {
      const x = this.x(t, w);
      if (x < -50 || x > w + 50) continue;
      ctx.beginPath(); ctx.moveTo(x + 0.5, y); ctx.lineTo(x + 0.5, y + 5); ctx.stroke();
      ctx.strokeStyle = '#eee';
      ctx.beginPath(); ctx.moveTo(x + 0.5, TOP); ctx.lineTo(x + 0.5, y); ctx.stroke();
      ctx.strokeStyle = '#999';
      ctx.fillText(this.tickLabel(t, unit), x + 3, y + 7);
      if (++n > 200) break;
    }
  }

  *ticks(step, unit) {
    const p = parts(this.t0, this.zone);
    if (unit === 'h') {
      const hrs = step / HOUR;
      let t = fromWall(p.y, p.mo, p.d, Math.floor(p.h / hrs) * hrs, this.zone);
      for (let i = 0; t < this.t1 && i < 500; i++, t += step) yield t;
    } else if (unit === 'd') {
      const days = step / DAY;
      for (let i = 0, d = p.d; i < 500; i++, d += days) {
        const t = fromWall(p.y, p.mo, d, 0, this.zone);
        if (t > this.t1) break;
        yield t;
      }
    } else if (unit === 'mo') {
      const months = Math.round(step / (31 * DAY)) === 1 ? 1 : 3;
      let m0 = Math.floor((p.mo - 1) / months) * months;
      for (let i = 0; i < 500; i++, m0 += months) {
        const t = fromWall(p.y + Math.floor(m0 / 12), (m0 % 12) + 1, 1, 0, this.zone);
        if (t > this.t1) break;
        yield t;
      }
    } else {
      const years = Math.round(step / (366 * DAY));
      for (let y = Math.floor(p.y / years) * years, i = 0; i < 500; i++, y += years) {
        const t = fromWall(y, 1, 1, 0, this.zone);
        if (t > this.t1) break;
        yield t;
      }
    }
  }

  tickLabel(t, unit) {
    const p = parts(t, this.zone);
    const two = (n) => String(n).padStart(2, '0');
    if (unit === 'y') return String(p.y);
    if (unit === 'mo') return `${p.y}-${two(p.mo)}`;
    if (unit === 'd') return `${p.y}-${two(p.mo)}-${two(p.d)}`;
    return `${two(p.mo)}-${two(p.d)} ${two(p.h)}:00`;
  }

  // The segment under (x, y) in CSS pixels, -1 for none; a bar narrower than 6 px is hit from
  // 3 px around it.
  hit(px, py) {
    const w = this.canvas.clientWidth;
    let lane = -1;
    for (let l = 0; l < this.lanes; l++) { const y = this.laneY(l); if (py >= y && py < y + LANE_H) lane = l; }
    if (lane < 0) return -1;
    const t = this.t0 + (px / w) * (this.t1 - this.t0);
    const slack = (3 / w) * (this.t1 - this.t0);
    let best = -1, bestD = Infinity;
    for (let i = this.firstFrom(t - slack); i < this.segs.length; i++) {
      const s = this.segs[i];
      if (s.start > t + slack) break;
      if (s.lane !== lane || s.end < t - slack) continue;
      const d = t < s.start ? s.start - t : t > s.end ? t - s.end : 0;
      if (d < bestD) { best = i; bestD = d; }
    }
    return best;
  }

  gapAt(px, py) {
    const gy = this.gapY();
    if (py < gy || py > gy + GAP_ROW) return null;
    const w = this.canvas.clientWidth;
    const t = this.t0 + (px / w) * (this.t1 - this.t0), slack = (3 / w) * (this.t1 - this.t0);
    return this.gaps.find((g) => g.start - slack <= t && t <= g.end + slack) || null;
  }

  select(i, add) {
    const s = this.segs[i];
    if (!s) return;
    if (!add) this.selected.clear();
    if (add && this.selected.has(s.id)) this.selected.delete(s.id); else this.selected.add(s.id);
    this.cursor = i;
    this.render();
    this.onSelect(s, [...this.selected].map((id) => this.segs.find((x) => x.id === id)));
  }

  selectId(id, add) {
    const i = this.segs.findIndex((s) => s.id === id);
    if (i >= 0) this.select(i, add);
  }

  // Centers the view on t, zooming in to a month when the view is wider.
  center(t) {
    const span = Math.min(this.t1 - this.t0, SPANS.Month);
    this.setView(t - span / 2, t + span / 2);
    this.render();
  }

  moveCursor(delta) {
    if (!this.segs.length) return;
    const i = Math.min(Math.max((this.cursor < 0 ? (delta > 0 ? -1 : this.segs.length) : this.cursor) + delta, 0), this.segs.length - 1);
    const s = this.segs[i];
    if (s.end <= this.t0 || s.start >= this.t1) {
      const span = this.t1 - this.t0;
      this.setView((s.start + s.end) / 2 - span / 2, (s.start + s.end) / 2 + span / 2);
    }
    this.select(i, false);
  }

  bind() {
    const c = this.canvas;
    let drag = null;
    c.addEventListener('pointerdown', (e) => { drag = { x: e.clientX, t0: this.t0, t1: this.t1, moved: false }; c.setPointerCapture(e.pointerId); });
    c.addEventListener('pointermove', (e) => {
      const r = c.getBoundingClientRect();
      if (drag) {
        const dx = e.clientX - drag.x;
        if (Math.abs(dx) > 3) drag.moved = true;
        if (drag.moved) {
          const dt = (dx / r.width) * (drag.t1 - drag.t0);
          this.setView(drag.t0 - dt, drag.t1 - dt);
          this.render();
        }
        return;
      }
      const i = this.hit(e.clientX - r.left, e.clientY - r.top);
      if (i !== this.hover) { this.hover = i; this.render(); }
      this.onHover(this.segs[i] || null, e.clientX - r.left, e.clientY - r.top, this.gapAt(e.clientX - r.left, e.clientY - r.top));
    });
    c.addEventListener('pointerleave', () => { this.hover = -1; this.onHover(null); this.render(); });
    c.addEventListener('pointerup', (e) => {
      const d = drag;
      drag = null;
      if (d && d.moved) return;
      const r = c.getBoundingClientRect();
      const i = this.hit(e.clientX - r.left, e.clientY - r.top);
      if (i >= 0) this.select(i, e.shiftKey || e.ctrlKey || e.metaKey);
      else {
        const g = this.gapAt(e.clientX - r.left, e.clientY - r.top);
        if (g) this.onSelect(null, [], g);
      }
    });
    c.addEventListener('wheel', (e) => {
      e.preventDefault();
      const r = c.getBoundingClientRect();
      if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY)) this.pan((e.deltaX || e.deltaY) / 1000);
      else this.zoom(e.deltaY > 0 ? 1.25 : 0.8, e.clientX - r.left);
    }, { passive: false });
    c.addEventListener('keydown', (e) => {
      const keys = {
        ArrowRight: () => this.moveCursor(1), ArrowLeft: () => this.moveCursor(-1),
        '+': () => this.zoom(0.5), '=': () => this.zoom(0.5), '-': () => this.zoom(2),
        PageDown: () => this.pan(0.5), PageUp: () => this.pan(-0.5),
        Home: () => this.moveCursor(-this.segs.length), End: () => this.moveCursor(this.segs.length),
        ' ': () => this.select(this.cursor, true), Enter: () => this.select(this.cursor, false),
        Escape: () => { this.selected.clear(); this.render(); this.onSelect(null, []); },
      };
      const f = keys[e.key];
      if (f) { e.preventDefault(); f(); }
    });
    new ResizeObserver(() => this.render()).observe(c);
  }
}
