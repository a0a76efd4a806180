// One plan drawn (Plan::to_json, as `strata plan --json` prints it): the predicted figures,
// the memory each tier holds, where each layer's weights, KV cache and attention go, a
// mixture of experts' routed experts per layer and tier (GPU, the DRAM cache, NVMe), and the
// streams of a decode step with the one that binds it. The planner page shows one, or two
// side by side when comparing.
"use strict";

const StrataPlanView = (() => {
  const { el, svg, formatBytes, formatSeconds } = Strata;
  const EXPERT_TIERS = [["gpu", "GPU memory (computed there)", Strata.PLACE_COLORS.gpu],
    ["dram", "DRAM (the expert cache, or resident)", Strata.PLACE_COLORS["dram(cpu)"]],
    ["nvme", "NVMe (read on a miss)", Strata.PLACE_COLORS["nvme(cpu)"]]];

  function card(figure, label, text, value) {
    return el("div", {}, el("span", { class: "label" }, label),
      el("span", { class: "value", "data-figure": figure, "data-value": value ?? null }, text));
  }

  function memoryLine(plan) {
    const used = plan.prediction.memory_bytes, b = plan.budgets;
    return `Uses ${b.gpu ? `GPU ${formatBytes(used.gpu)} of ${formatBytes(b.gpu)}, ` : ""}DRAM ${formatBytes(used.dram)} of ` +
      `${formatBytes(b.dram)}, NVMe ${formatBytes(used.nvme)}; batch ${plan.policy.batch} in ${plan.policy.n_micro} ` +
      `micro-batch(es), KV ${plan.policy.kv_type}, CPU attention ${plan.policy.cpu_attention ? "on" : "off"}.`;
  }

  // Per layer, where each routed expert lives: `device` lists go to the GPU, `dram` lists to
  // the DRAM cache of an offloaded layer; the others of an offloaded layer stay on NVMe, those
  // of a resident layer in DRAM.
  function expertTiers(plan) {
    const e = plan.experts;
    return plan.layers.map((l, il) => {
      const onGpu = new Set((e.device || [])[il] || []);
      const cached = new Set((e.dram || [])[il] || []);
      const offloaded = e.enabled && l.weights === "nvme(cpu)";
      const tiers = [];
      for (let x = 0; x < e.n_expert; ++x)
        tiers.push(onGpu.has(x) ? "gpu" : !offloaded || cached.has(x) ? "dram" : "nvme");
      return tiers;
    });
  }

  // One column per layer, one cell per expert, the GPU's at the top, then DRAM's, then NVMe's.
  function drawExperts(plan, width) {
    const tiers = expertTiers(plan);
    const n = tiers.length, E = plan.experts.n_expert;
    const left = 80;
    const w = Math.max(3, Math.min(24, (width - left - 10) / Math.max(n, 1)));
    const h = Math.max(2, Math.min(14, 160 / E));
    const box = svg("svg", { width: left + n * w + 10, height: E * h + 40, role: "img", class: "experts",
      "aria-label": `${E} routed experts in each of ${n} layers, by tier` });
    box.append(svg("text", { x: 0, y: 14 }, "experts"));
    const order = { gpu: 0, dram: 1, nvme: 2 };
    tiers.forEach((layer, il) => {
      [...layer].sort((a, b) => order[a] - order[b]).forEach((tier, row) => {
        box.append(svg("rect", { x: left + il * w, y: row * h, width: Math.max(w - 0.5, 1), height: Math.max(h - 0.5, 1),
          fill: EXPERT_TIERS[order[tier]][2], "data-layer": il, "data-tier": tier }));
      });
      const counts = Object.fromEntries(Object.keys(order).map((t) => [t, layer.filter((x) => x === t).length]));
      box.append(svg("rect", { x: left + il * w, y: 0, width: w, height: E * h, fill: "transparent", "data-layer-experts": il,
        "data-gpu": counts.gpu, "data-dram": counts.dram, "data-nvme": counts.nvme },
        svg("title", {}, `layer ${il}: ${counts.gpu} experts on the GPU, ${counts.dram} in DRAM, ${counts.nvme} on NVMe`)));
    });
    for (let i = 0; i < n; i += Math.max(1, Math.ceil(n / (width / 90))))
      box.append(svg("text", { x: left + i * w, y: E * h + 14, "font-size": 10 }, String(i)));
    return box;
  }

  function expertSummary(plan) {
    const e = plan.experts;
    const totals = { gpu: 0, dram: 0, nvme: 0 };
    for (const layer of expertTiers(plan)) for (const t of layer) ++totals[t];
    const parts = [`${e.n_expert} routed experts in each of ${plan.layers.length} layers: ${totals.gpu} on the GPU, ` +
      `${totals.dram} in DRAM, ${totals.nvme} on NVMe`];
    if (e.enabled) parts.push(`a DRAM cache of ${e.cache_slots} experts, expected hit rate ${(100 * e.hit_rate).toFixed(1)} % ` +
      `(${e.routing}); ${formatBytes(e.nvme_bytes_per_token)} read from NVMe per token`);
    return parts.join("; ") + ".";
  }

  function drawStreams(plan) {
    const d = plan.prediction.decode;
    const entries = Object.entries(d.streams_s);
    const max = Math.max(...entries.map(([, s]) => s), 1e-12);
    const left = 110, width = 420, h = 18;
    const box = svg("svg", { width: left + width + 90, height: entries.length * (h + 4), role: "img", "aria-label": "decode step per stream" });
    entries.forEach(([name, s], i) => {
      const y = i * (h + 4);
      box.append(svg("text", { x: 0, y: y + h * 0.75 }, name));
      box.append(svg("rect", { x: left, y, width: Math.max(1, (width * s) / max), height: h, fill: name === d.bottleneck ? "#e6550d" : "#9ecae1" }));
      box.append(svg("text", { x: left + (width * s) / max + 6, y: y + h * 0.75 }, s > 0 ? formatSeconds(s) : "–"));
    });
    return box;
  }

  // The whole view of `plan` for a column `width` pixels wide; `title` ([name, command]) says
  // which when comparing.
  function draw(plan, width, title) {
    const p = plan.prediction;
    const view = el("section", { class: "plan-view" });
    if (title) view.append(el("h3", {}, title[0], el("code", { class: "plan-command" }, title[1])));
    view.append(el("div", { class: "cards" },
      card("ttft", "Time to first token", formatSeconds(p.ttft_s), p.ttft_s),
      card("tps", "Decode tokens/s per sequence", p.decode_tps_per_seq.toPrecision(3), p.decode_tps_per_seq),
      card("tps-batch", "Decode tokens/s, whole batch", p.decode_tps_aggregate.toPrecision(3), p.decode_tps_aggregate),
      card("bottleneck", "What binds decode", p.decode.bottleneck)));
    view.append(el("p", { class: "muted memory" }, memoryLine(plan)));
    view.append(el("h2", {}, "Placement per layer"), el("div", { class: "chart layers" }, Strata.drawPlacement(plan, width)));
    if (plan.experts && plan.experts.n_expert > 0) {
      view.append(el("h2", {}, "Experts per layer and tier"),
        el("div", { class: "legend" }, ...EXPERT_TIERS.map(([, label, color]) =>
          el("span", {}, svg("svg", { width: 12, height: 12 }, svg("rect", { width: 12, height: 12, fill: color })), ` ${label}`))),
        el("div", { class: "chart experts-chart" }, drawExperts(plan, width)),
        el("p", { class: "muted expert-summary" }, expertSummary(plan)));
    }
    view.append(el("h2", {}, "Decode step per stream"), el("div", { class: "chart streams" }, drawStreams(plan)));
    return view;
  }

  // "B against A": how much faster or slower the second plan is.
  function comparison(a, b) {
    const ratio = (x, y) => (y > 0 ? x / y : 0);
    const tps = ratio(b.prediction.decode_tps_per_seq, a.prediction.decode_tps_per_seq);
    const ttft = ratio(b.prediction.ttft_s, a.prediction.ttft_s);
    return `Against the pinned plan: ×${tps.toPrecision(3)} decode tokens/s per sequence, ×${ttft.toPrecision(3)} time to first token.`;
  }

  return { draw, comparison, expertTiers };
})();
