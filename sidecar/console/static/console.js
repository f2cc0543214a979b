// Skiff console: polls a page's JSON endpoint every few seconds, updates the numbers
// marked data-live="name" and appends to small uPlot charts (last CHART_POINTS samples).
// A chart [id, label, field, true] shows the field's rate per second (a counter).
"use strict";
const POLL_MS = 3000;
const CHART_POINTS = 100;

function skiffCharts(url, charts) {
  const times = [];
  const series = charts.map(() => []);
  const last = {};
  const plots = charts.map(([id, label]) => {
    const el = document.getElementById(id);
    if (!el || typeof uPlot === "undefined") return null;
    return new uPlot(
      { width: 420, height: 180, title: label,
        series: [{}, { label: label, stroke: "#1d3557", width: 2 }] },
      [[], []], el);
  });
  async function poll() {
    try {
      const answer = await fetch(url, { credentials: "same-origin" });
      if (answer.ok) {
        const doc = await answer.json();
        for (const el of document.querySelectorAll("[data-live]")) {
          const value = doc[el.dataset.live];
          if (value !== undefined) el.textContent = String(value);
        }
        times.push(doc.time);
        charts.forEach(([, , field, rate], i) => {
          let value = doc[field] ?? null;
          if (rate) {
            const before = last[field];
            last[field] = [doc.time, value];
            value = before && value !== null
              ? Math.max(value - before[1], 0) / Math.max(doc.time - before[0], 1e-3) : null;
          }
          series[i].push(value);
        });
        if (times.length > CHART_POINTS) { times.shift(); series.forEach((s) => s.shift()); }
        plots.forEach((plot, i) => plot && plot.setData([times.slice(), series[i].slice()]));
        document.body.dataset.polled = String(Number(document.body.dataset.polled || 0) + 1);
      }
    } finally {
      setTimeout(poll, POLL_MS);
    }
  }
  poll();
}
