// The planner page's controls as the flags of `strata plan`: every flag the planner takes has
// a control, and the controls make both the POST /v1/plan request (field = flag without
// dashes) and the command line that gives the same plan. Hardware is catalog parts, a catalog
// system, or (`strata plan --ui` only) the machine it runs on (--hw FILE or the probe). With
// catalog parts every part is sent; with a system or the machine only what the user changed
// or the page was started with, so that the rest comes from the system or the profile.
"use strict";

const StrataPlanControls = (() => {
  const $ = (id) => document.getElementById(id);
  // field -> [control id, flag, how its value is read]
  const FLAGS = {
    weight_type: ["weight_type", "--weight-type", "text"], gpu: ["gpu", "--gpu", "text"], gpu_mem: ["gpu_mem", "--gpu-mem", "gib"],
    pcie: ["pcie", "--pcie", "text"], dram: ["dram", "--dram", "gib"], nvme: ["nvme", "--nvme", "text"],
    prompt_len: ["prompt_len", "--prompt-len", "int"], gen_len: ["gen_len", "--gen-len", "int"], batch: ["batch", "--batch", "int"],
    objective: ["objective", "--objective", "text"], kv_type: ["kv_type", "--kv-type", "text"], cpu: ["cpu", "--cpu", "text"],
    dram_kind: ["dram_kind", "--dram-kind", "text"], nvme_bw: ["nvme_bw", "--nvme-bw", "float"], nvme_size: ["nvme_size", "--nvme-size", "text"],
    gpu_budget: ["gpu_budget", "--gpu-budget", "text"], dram_budget: ["dram_budget", "--dram-budget", "text"],
    nvme_budget: ["nvme_budget", "--nvme-budget", "text"], no_cpu_attention: ["no_cpu_attention", "--no-cpu-attention", "flag"],
    no_recompute: ["no_recompute", "--no-recompute", "flag"],
  };
  // Catalog parts: not with the machine's own profile.
  const PARTS = ["gpu", "gpu_mem", "pcie", "nvme", "cpu", "dram_kind"];
  const touched = new Set();  // fields the user changed (or the page was started with)
  let options = null;

  const hardware = () => $("hardware").value;  // "parts", "system:NAME" or "machine"
  const isFile = () => $("model").value.startsWith("file:");
  const gpuEntry = () => options.gpus.find((g) => g.name === $("gpu").value);

  function read(field) {
    const [id, , kind] = FLAGS[field];
    const c = $(id);
    if (kind === "flag") return c.checked || undefined;
    if (c.value === "") return undefined;
    if (kind === "gib") return `${c.value}G`;
    if (kind === "int") return Number(c.value);
    if (kind === "float") return Number(c.value);
    return c.value;
  }

  // Whether a field goes into the request under the chosen hardware.
  function sent(field) {
    const c = $(FLAGS[field][0]);
    if (c.disabled) return false;
    const mode = hardware();
    if (mode === "parts" || !["gpu", "gpu_mem", "pcie", "dram", "nvme"].includes(field)) return true;
    return touched.has(field);
  }

  // The plan request: the `strata plan` flags by name.
  function request() {
    const r = { model: $("model").value.replace(/^(file|shape):/, "") };
    const mode = hardware();
    if (mode.startsWith("system:")) r.machine = mode.slice(7);
    if (mode === "machine") r.hw = "machine";
    for (const field of Object.keys(FLAGS)) {
      if (!sent(field)) continue;
      const v = read(field);
      if (v !== undefined) r[field] = v;
    }
    return r;
  }

  function shellQuote(s) {
    return /^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, "'\\''")}'`;
  }

  // The command line that gives the plan of request `r`.
  function command(r) {
    const file = options.local_models.find((m) => m.name === r.model);
    const args = ["strata", "plan", ...(file ? ["-m", file.path] : ["--shape", r.model])];
    if (r.machine) args.push("--machine", r.machine);
    if (r.hw && options.machine && options.machine.file) args.push("--hw", options.machine.file);
    for (const [field, [, flag, kind]] of Object.entries(FLAGS)) {
      if (r[field] === undefined) continue;
      if (kind === "flag") args.push(flag);
      else args.push(flag, String(r[field]));
    }
    return args.map(shellQuote).join(" ");
  }

  function fill(select, items, chosen) {
    select.replaceChildren(...items.map(([value, label]) => Strata.el("option", { value, selected: value === chosen }, label)));
  }

  // Enables what the chosen model and hardware take.
  function sync() {
    const mode = hardware();
    $("weight_type").disabled = isFile();
    for (const field of PARTS) $(FLAGS[field][0]).disabled = mode === "machine";
    const g = gpuEntry();
    if (mode !== "machine") $("gpu_mem").disabled = $("pcie").disabled = !g;
    for (const id of ["gpu_mem", "dram", "prompt_len", "gen_len", "batch"]) $(`${id}-out`).textContent = outText(id);
  }

  function outText(id) {
    const v = $(id).value;
    if (id === "gpu_mem" || id === "dram") return `${v} GiB${$(id).disabled || sent(id) ? "" : " (the profile's)"}`;
    return v;
  }

  function onGpuChange() {
    const g = gpuEntry();
    if (g) {
      const gib = Math.round(g.memory_bytes / 2 ** 30);
      $("gpu_mem").max = gib;
      if (!touched.has("gpu_mem") || Number($("gpu_mem").value) > gib) $("gpu_mem").value = gib;
    }
    sync();
  }

  // "64G", "1T", "512M" as GiB (the sliders' unit).
  function gib(size) {
    const m = /^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*$/i.exec(size);
    if (!m) return NaN;
    return Number(m[1]) * 1024 ** ("KMGT".indexOf(m[2].toUpperCase()) - 2 + (m[2] ? 0 : -1));
  }

  // The page's first choices: the flags `strata plan --ui` was started with, else an example.
  function applyDefaults(d) {
    const set = (id, value) => {
      const c = $(id);
      if (c.type === "checkbox") c.checked = !!value;
      else if (FLAGS[id] && FLAGS[id][2] === "gib") c.value = Math.round(gib(value));
      else c.value = String(value);
    };
    if (d.model) $("model").value = [...$("model").options].some((o) => o.value === `file:${d.model}`) ? `file:${d.model}` : `shape:${d.model}`;
    $("hardware").value = d.hw ? "machine" : d.machine ? `system:${d.machine}` : "parts";
    if (d.gpu) set("gpu", d.gpu);
    onGpuChange();
    for (const [field, [id]] of Object.entries(FLAGS)) {
      if (d[field] === undefined || field === "gpu") continue;
      set(id, d[field]);
      touched.add(field);
    }
    $("frontier").checked = !!d.frontier;
    sync();
  }

  function init(opts, onChange) {
    options = opts;
    const models = $("model");
    if (options.local_models.length)
      models.append(Strata.el("optgroup", { label: "GGUF files" },
        ...options.local_models.map((m) => Strata.el("option", { value: `file:${m.name}` }, m.name))));
    models.append(Strata.el("optgroup", { label: "Catalog shapes" },
      ...options.shapes.map((s) => Strata.el("option", { value: `shape:${s.name}`, selected: s.name === "llama3-70b" },
        `${s.name} (${s.n_layer} layers${s.n_expert ? `, ${s.n_expert} experts` : ""})`))));
    fill($("hardware"), [["parts", "Catalog parts"], ...options.systems.map((s) => [`system:${s.name}`, `System: ${s.name}`]),
      ...(options.machine ? [["machine", `This machine: ${options.machine.source}`]] : [])], "parts");
    fill($("gpu"), [["none", "none (CPU only)"], ...options.gpus.map((g) => [g.name, `${g.name} (${Strata.formatBytes(g.memory_bytes)})`])], "rtx4090");
    fill($("nvme"), options.nvme.map((d) => [d.name, `${d.name} (${d.read_gbps} GB/s, e.g. ${d.example})`]), "gen4");
    fill($("cpu"), [["", "the catalog's default"], ...options.cpus.map((c) => [c.name, `${c.name} (${c.cores} cores)`])], "");
    fill($("dram_kind"), [["", "the CPU's"], ...options.dram_kinds.map((k) => [k, k])], "");
    if (options.defaults) applyDefaults(options.defaults);
    else onGpuChange();
    const form = $("controls");
    const changed = (e) => {
      const field = Object.keys(FLAGS).find((f) => FLAGS[f][0] === e.target.id);
      if (field) touched.add(field);
      if (e.target.id === "gpu") onGpuChange();
      sync();
      onChange();
    };
    form.addEventListener("input", changed);
    form.addEventListener("change", changed);
    form.addEventListener("submit", (e) => e.preventDefault());
  }

  return { init, request, command };
})();
