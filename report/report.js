// pipetwin report: draws the page's charts as SVG from the JSON block #pt-data (written by
// report/html.cpp). Inlined into the page at build time; no network, no libraries.
//   gantts[i]  drawn into .gantt-host[data-gantt=i]: one row per device stream, a bar per action
//              coloured by kind with its micro-batch number, hatched bubbles on compute rows, a
//              green strip under the part of each transfer that overlaps compute
//   charts[i]  drawn into .line-host[data-chart=i]: a line per series, a dot per point; optional
//              fields (the schedule-choice charts): series[k].fits (per point; a point that does
//              not fit is hollow and its segments dashed), marks (vertical lines at x with a
//              label: where the choice flips), hlines (horizontal lines at y with a label: the
//              device memory), winners (points ringed: the fastest that fits at each x),
//              zero: false (the y axis need not start at 0)
// Text from files is only ever set with textContent / setAttribute, never parsed as HTML.
// When done, <body data-render-status="ok"> and the counts of drawn elements (ganttPairs: the
// prediction/measurement pairs with both charts drawn) go to data- attributes of <body> and to
// #pt-render-counts (read by tests/report_test.sh and tests/report_main_job_test.sh).
(function () {
  'use strict';
  var NS = 'http://www.w3.org/2000/svg';
  var body = document.body;
  var data = JSON.parse(document.getElementById('pt-data').textContent);
  var KIND_COLOURS = {
    forward: '#4e79a7', backward: '#59a14f', recompute: '#f28e2b', optimizer_step: '#b07aa1',
    send: '#8c8c8c', recv: '#b5aca6', allreduce: '#e15759'
  };
  var PALETTE = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948', '#b07aa1',
                 '#ff9da7', '#9c755f', '#bab0ac', '#1f77b4', '#d62728'];
  var zoom = {};  // gantt group index -> zoom factor

  function colourOf(kind) {
    if (Object.prototype.hasOwnProperty.call(KIND_COLOURS, kind)) return KIND_COLOURS[kind];
    var h = 0;
    for (var i = 0; i < kind.length; i++) h = (h * 31 + kind.charCodeAt(i)) >>> 0;
    return PALETTE[h % PALETTE.length];
  }

  function svgEl(tag, attrs, parent) {
    var e = document.createElementNS(NS, tag);
    for (var k in attrs) {
      if (Object.prototype.hasOwnProperty.call(attrs, k)) e.setAttribute(k, attrs[k]);
    }
    if (parent) parent.appendChild(e);
    return e;
  }

  function svgText(parent, x, y, text, cls, anchor) {
    var t = svgEl('text', {x: x, y: y, 'class': cls || '', 'text-anchor': anchor || 'start'}, parent);
    t.textContent = text;
    return t;
  }

  // About n round tick values (1, 2, 5 x 10^k) covering [lo, hi].
  function niceTicks(lo, hi, n) {
    if (!(hi > lo)) hi = lo + 1;
    var raw = (hi - lo) / Math.max(n, 1);
    var mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var r = raw / mag;
    var step = (r <= 1 ? 1 : r <= 2 ? 2 : r <= 5 ? 5 : 10) * mag;
    var ticks = [];
    for (var k = Math.ceil(lo / step - 1e-9); k * step <= hi + step * 1e-9; k++) {
      ticks.push(Number((k * step).toPrecision(12)));
    }
    return ticks;
  }

  function fmtNum(v) {
    var a = Math.abs(v);
    if (a >= 1e6) return (v / 1e6).toPrecision(3) + 'M';
    if (a >= 1e4) return (v / 1e3).toPrecision(3) + 'k';
    if (a === 0) return '0';
    return String(Number(v.toPrecision(4)));
  }

  function fmtTime(us) {
    var a = Math.abs(us);
    if (a >= 1e6) return fmtNum(us / 1e6) + ' s';
    if (a >= 1e3) return fmtNum(us / 1e3) + ' ms';
    return fmtNum(us) + ' us';
  }

  var tooltip = document.getElementById('pt-tooltip');
  function showTip(evt, text) {
    tooltip.textContent = text;
    tooltip.hidden = false;
    tooltip.style.left = (evt.clientX + 14) + 'px';
    tooltip.style.top = (evt.clientY + 14) + 'px';
  }
  function hideTip() { tooltip.hidden = true; }

  function ganttTip(g, evt) {
    var t = evt.target;
    var i = t.getAttribute && t.getAttribute('data-i');
    if (i === null || i === undefined) { hideTip(); return; }
    var e = g.events[Number(i)];
    var row = g.rows[e[0]];
    showTip(evt, e[5] + '\n' + row.device + ' (' + row.label + ')\n' + fmtTime(e[1]) + ' \u2192 ' +
            fmtTime(e[2]) + '  (' + fmtTime(e[2] - e[1]) + ')');
  }

  function drawGanttLegend(svg, g, y, hatchId) {
    var x = 8;
    function item(draw, label) {
      draw(x);
      x += 16 + svgText(svg, x + 14, y + 10, label, 'legend').getComputedTextLength() + 12;
    }
    g.kinds.forEach(function (k) {
      item(function (x0) {
        svgEl('rect', {x: x0, y: y + 1, width: 11, height: 11, fill: colourOf(k)}, svg);
      }, k);
    });
    item(function (x0) {
      svgEl('rect', {x: x0, y: y + 1, width: 11, height: 11, fill: 'url(#' + hatchId + ')',
                     stroke: '#c44'}, svg);
    }, 'idle (bubble)');
    item(function (x0) {
      svgEl('rect', {x: x0, y: y + 8, width: 11, height: 4, fill: '#2ca02c'}, svg);
    }, 'transfer overlapping compute');
  }

  function drawGanttAxis(svg, X, t1, top, bottom) {
    niceTicks(0, t1, 8).forEach(function (t) {
      var x = X(t);
      svgEl('line', {x1: x, x2: x, y1: top - 4, y2: bottom, 'class': 'grid'}, svg);
      svgText(svg, x, top - 7, fmtTime(t), 'tick', 'middle');
    });
  }

  function drawGantt(host, g, index, factor) {
    host.textContent = '';
    var labelW = 118, rowH = 18, top = 20;
    var visible = Math.max(host.clientWidth || 0, 360);
    var width = Math.round(labelW + (visible - labelW - 12) * factor + 12);
    var plotW = width - labelW - 12;
    var legendY = top + g.rows.length * rowH + 8;
    var svg = svgEl('svg', {width: width, height: legendY + 20, 'class': 'gantt-svg'}, host);
    var hatchId = 'pt-hatch-' + index;
    var pat = svgEl('pattern', {id: hatchId, width: 6, height: 6, patternUnits: 'userSpaceOnUse',
                                patternTransform: 'rotate(45)'}, svgEl('defs', {}, svg));
    svgEl('rect', {width: 6, height: 6, fill: '#fdecea'}, pat);
    svgEl('line', {x1: 0, y1: 0, x2: 0, y2: 6, stroke: '#e0a0a0', 'stroke-width': 2}, pat);
    var scale = plotW / Math.max(g.scale_end_us, 1e-9);
    function X(t) { return labelW + t * scale; }
    function Y(row) { return top + row * rowH; }
    g.rows.forEach(function (r, i) {
      svgEl('rect', {x: labelW, y: Y(i), width: plotW, height: rowH - 2,
                     'class': 'row-bg ' + r.role}, svg);
      var label = svgText(svg, labelW - 6, Y(i) + rowH - 6, r.label, 'row-label', 'end');
      svgEl('title', {}, label).textContent = r.device;
    });
    drawGanttAxis(svg, X, g.scale_end_us, top, Y(g.rows.length));
    g.bubbles.forEach(function (b) {
      svgEl('rect', {x: X(b[1]), y: Y(b[0]), width: Math.max(0, (b[2] - b[1]) * scale),
                     height: rowH - 2, fill: 'url(#' + hatchId + ')', 'class': 'bubble'}, svg);
    });
    g.events.forEach(function (e, i) {
      var w = Math.max(0.75, (e[2] - e[1]) * scale);
      svgEl('rect', {x: X(e[1]), y: Y(e[0]) + 1, width: w, height: rowH - 4,
                     fill: colourOf(g.kinds[e[3]]), 'class': 'ev', 'data-i': i}, svg);
      if (e[4] >= 0 && w >= 7 * String(e[4]).length + 4) {
        svgText(svg, X(e[1]) + w / 2, Y(e[0]) + rowH - 6, String(e[4]), 'mb', 'middle');
      }
    });
    g.overlaps.forEach(function (o) {
      svgEl('rect', {x: X(o[1]), y: Y(o[0]) + rowH - 6, width: Math.max(0.75, (o[2] - o[1]) * scale),
                     height: 4, fill: '#2ca02c', 'class': 'overlap'}, svg);
    });
    drawGanttLegend(svg, g, legendY, hatchId);
    svg.addEventListener('mousemove', function (evt) { ganttTip(g, evt); });
    svg.addEventListener('mouseleave', hideTip);
  }

  function drawGanttGroup(groupEl, groupIndex) {
    var factor = zoom[groupIndex] || 1;
    groupEl.querySelectorAll('.gantt-host').forEach(function (host) {
      var i = Number(host.getAttribute('data-gantt'));
      drawGantt(host, data.gantts[i], i, factor);
    });
  }

  // A zoom selector per group; the charts of a pair scroll together.
  function setUpGanttGroup(groupEl, groupIndex) {
    var bar = document.createElement('div');
    bar.className = 'zoom';
    var label = document.createElement('label');
    label.textContent = 'zoom ';
    var select = document.createElement('select');
    [1, 2, 4, 8, 16, 32].forEach(function (f) {
      var o = document.createElement('option');
      o.value = String(f);
      o.textContent = f + '\u00d7';
      select.appendChild(o);
    });
    select.addEventListener('change', function () {
      zoom[groupIndex] = Number(select.value);
      drawGanttGroup(groupEl, groupIndex);
      count();
    });
    label.appendChild(select);
    bar.appendChild(label);
    groupEl.insertBefore(bar, groupEl.firstChild);
    var hosts = groupEl.querySelectorAll('.gantt-host');
    hosts.forEach(function (h) {
      h.addEventListener('scroll', function () {
        hosts.forEach(function (o) { if (o !== h && o.scrollLeft !== h.scrollLeft) o.scrollLeft = h.scrollLeft; });
      });
    });
  }

  // Sweeps over K or M step by powers of two: such an x axis is drawn in log2.
  function powersOfTwo(xs) {
    var seen = {};
    var ok = xs.every(function (x) {
      seen[x] = true;
      return x > 0 && Number.isInteger(Math.log2(x));
    });
    return ok && Object.keys(seen).length >= 3;
  }

  function lineScales(c, W, H, m) {
    var xs = [], ys = c.zero === false ? [] : [0];
    c.series.forEach(function (s) { xs = xs.concat(s.x); ys = ys.concat(s.y); });
    (c.hlines || []).forEach(function (h) { ys.push(h.y); });
    if (c.zero === false && ys.length) {
      var lo = Math.min.apply(null, ys), hi = Math.max.apply(null, ys);
      ys.push(lo - 0.08 * Math.max(hi - lo, Math.abs(lo) * 0.01));
    }
    var log = powersOfTwo(xs);
    var fx = log ? Math.log2 : function (v) { return v; };
    var x0 = Math.min.apply(null, xs.map(fx)), x1 = Math.max.apply(null, xs.map(fx));
    var y0 = Math.min.apply(null, ys), y1 = Math.max.apply(null, ys);
    if (x1 === x0) { x0 -= 1; x1 += 1; }
    if (y1 === y0) { y1 = y0 + 1; }
    var yt = niceTicks(y0, y1, 5);
    y1 = Math.max(y1, yt[yt.length - 1]);
    y0 = Math.min(y0, yt[0]);
    var xt = [];
    if (log) {
      for (var e = x0; e <= x1; e++) xt.push(Math.pow(2, e));
    } else {
      xt = niceTicks(x0, x1, 6);
    }
    return {
      xt: xt, yt: yt, log: log,
      X: function (v) { return m.l + (fx(v) - x0) / (x1 - x0) * (W - m.l - m.r); },
      Y: function (v) { return H - m.b - (v - y0) / (y1 - y0) * (H - m.t - m.b); }
    };
  }

  function drawLine(host, c) {
    host.textContent = '';
    var W = Math.max(Math.min(host.clientWidth || 560, 640), 320), H = 280;
    var m = {l: 62, r: 14, t: 22, b: 40};
    var svg = svgEl('svg', {width: W, height: H, 'class': 'line-svg'}, host);
    var s = lineScales(c, W, H, m);
    svgText(svg, m.l, 14, c.y, 'chart-title');
    s.yt.forEach(function (v) {
      svgEl('line', {x1: m.l, x2: W - m.r, y1: s.Y(v), y2: s.Y(v), 'class': 'grid'}, svg);
      svgText(svg, m.l - 6, s.Y(v) + 4, fmtNum(v), 'tick', 'end');
    });
    s.xt.forEach(function (v) {
      if (s.X(v) < m.l - 1 || s.X(v) > W - m.r + 1) return;
      svgText(svg, s.X(v), H - m.b + 16, fmtNum(v), 'tick', 'middle');
    });
    svgEl('line', {x1: m.l, x2: W - m.r, y1: H - m.b, y2: H - m.b, 'class': 'axis'}, svg);
    svgText(svg, (m.l + W - m.r) / 2, H - 6, c.x + (s.log ? ' (log2 scale)' : ''), 'axis-label',
            'middle');
    var legend = document.createElement('div');
    legend.className = 'legend';
    c.series.forEach(function (ser, k) {
      var colour = PALETTE[k % PALETTE.length];
      var paths = seriesPaths(ser, s);
      svgEl('path', {d: paths.solid, stroke: colour, 'class': 'series'}, svg);
      if (paths.dashed) svgEl('path', {d: paths.dashed, stroke: colour, 'class': 'series-unfit'}, svg);
      ser.x.forEach(function (x, i) {
        var fits = !ser.fits || ser.fits[i];
        var dot = svgEl('circle', {cx: s.X(x), cy: s.Y(ser.y[i]), r: fits ? 3 : 3.5,
                                   fill: fits ? colour : '#fff', stroke: colour,
                                   'class': fits ? 'pt' : 'pt unfit'}, svg);
        dot.addEventListener('mousemove', function (evt) {
          showTip(evt, ser.name + '\n' + c.x + ' = ' + fmtNum(x) + '\n' + c.y + ' = ' +
                  fmtNum(ser.y[i]) + (fits ? '' : '\ndoes not fit in memory'));
        });
        dot.addEventListener('mouseleave', hideTip);
      });
      var item = document.createElement('span');
      var sw = document.createElement('i');
      sw.style.background = colour;
      item.appendChild(sw);
      item.appendChild(document.createTextNode(ser.name));
      legend.appendChild(item);
    });
    drawMarks(svg, c, s, W, H, m);
    if (c.series.some(function (ser) { return ser.fits && ser.fits.indexOf(false) >= 0; })) {
      var note = document.createElement('span');
      note.className = 'note';
      note.textContent = 'hollow, dashed: does not fit in memory';
      legend.appendChild(note);
    }
    host.appendChild(legend);
  }

  // A series as SVG path data: segments whose two ends fit (solid) and the others (dashed).
  function seriesPaths(ser, s) {
    var solid = [], dashed = [];
    function pt(i) { return s.X(ser.x[i]).toFixed(1) + ' ' + s.Y(ser.y[i]).toFixed(1); }
    if (!ser.fits) {
      return {solid: ser.x.map(function (x, i) { return (i ? 'L' : 'M') + pt(i); }).join(' '),
              dashed: ''};
    }
    for (var i = 0; i + 1 < ser.x.length; i++) {
      (ser.fits[i] && ser.fits[i + 1] ? solid : dashed).push('M' + pt(i) + ' L' + pt(i + 1));
    }
    if (ser.x.length === 1) solid.push('M' + pt(0));
    return {solid: solid.join(' '), dashed: dashed.join(' ')};
  }

  // Vertical marks (flips of the schedule choice) and horizontal lines (device memory).
  function drawMarks(svg, c, s, W, H, m) {
    (c.marks || []).forEach(function (mk) {
      var x = s.X(mk.x);
      svgEl('line', {x1: x, x2: x, y1: m.t, y2: H - m.b, 'class': 'flip-mark'}, svg);
      var label = svgText(svg, x + 3, m.t + 10, mk.label, 'mark-label');
      if (x + 3 + label.getComputedTextLength() > W) {
        label.setAttribute('x', x - 3);
        label.setAttribute('text-anchor', 'end');
      }
    });
    (c.winners || []).forEach(function (w) {
      svgEl('circle', {cx: s.X(w.x), cy: s.Y(w.y), r: 6.5, 'class': 'winner'}, svg);
    });
    (c.hlines || []).forEach(function (h) {
      var y = s.Y(h.y);
      svgEl('line', {x1: m.l, x2: W - m.r, y1: y, y2: y, 'class': 'hline'}, svg);
      svgText(svg, W - m.r - 2, y - 4, h.label, 'mark-label', 'end');
    });
  }

  // Side-by-side pairs with both charts drawn.
  function pairs() {
    var n = 0;
    document.querySelectorAll('.gantt-group.pair').forEach(function (g) {
      if (g.querySelectorAll('svg.gantt-svg').length === 2) n++;
    });
    return n;
  }

  function count() {
    var q = function (sel) { return document.querySelectorAll(sel).length; };
    var counts = {
      ganttCharts: q('svg.gantt-svg'), ganttBars: q('rect.ev'), microBatchLabels: q('text.mb'),
      bubbles: q('rect.bubble'), overlaps: q('rect.overlap'),
      lineCharts: q('svg.line-svg'), lines: q('path.series'), points: q('circle.pt'),
      unfitPoints: q('circle.pt.unfit'), flipMarks: q('line.flip-mark'), ganttPairs: pairs()
    };
    Object.keys(counts).forEach(function (k) { body.dataset[k] = String(counts[k]); });
    document.getElementById('pt-render-counts').textContent = JSON.stringify(counts);
  }

  function renderAll() {
    document.querySelectorAll('.gantt-group').forEach(function (el, i) { drawGanttGroup(el, i); });
    document.querySelectorAll('.line-host').forEach(function (host) {
      drawLine(host, data.charts[Number(host.getAttribute('data-chart'))]);
    });
    count();
  }

  try {
    document.querySelectorAll('.gantt-group').forEach(setUpGanttGroup);
    renderAll();
    body.setAttribute('data-render-status', 'ok');
    var pending = null;
    window.addEventListener('resize', function () {
      clearTimeout(pending);
      pending = setTimeout(renderAll, 150);
    });
  } catch (err) {
    body.setAttribute('data-render-status', 'error');
    console.error('pipetwin report: ' + (err && err.stack ? err.stack : err));
  }
})();
