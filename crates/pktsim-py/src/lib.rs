//! Thin PyO3 layer over pktsim-core. A scenario's text is parsed once into a [`Parsed`]
//! table; each set of overrides resolves into a [`Resolved`] scenario that runs or models.
//! Results cross as Python objects built straight from the core's serde types (`pyser`),
//! equal to what the JSON text of the `--json` contract reads back as; errors become
//! `pktsim.errors.ScenarioError` (a `ValueError`) with `origin`, `path`, `value`, `expected`.

mod pyser;

/// The extension's Rust memory comes from mimalloc rather than glibc's malloc. glibc gives
/// an engine run's memory back to the kernel as the run frees it (the top of the engine
/// thread's arena is trimmed; in a Dask worker, whose nanny sets `MALLOC_TRIM_THRESHOLD_`,
/// larger blocks are unmapped too), and the next run faults it in again: about 50 page
/// faults and 0.1 – 0.2 ms per short sweep point on a virtual machine, more than the
/// simulation of a 1 ms point. mimalloc keeps freed pages for the next run. Built without
/// transparent huge pages (`no_thp`: with them a run's few MB take whole 2 MB pages, and a
/// tiny `pktsim run` peaked at 26 MB against 18) and at version 2 (the 64-core `pktsim
/// run` peaks at 23.7 MB, against 24.4 with version 3 and 22.5 with glibc). Python's own
/// allocations are not affected.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};

use pktsim_core::engine::SimResult;
use pktsim_core::{loader, model, scenario, ConfigError, Error, ResolvedScenario, Scenario};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

fn to_pyerr(py: Python<'_>, e: Error) -> PyErr {
    let (origin, path, value, expected) = match &e {
        Error::Config(ConfigError { origin, path, value, expected, .. }) => {
            (origin.clone(), path.clone(), value.clone(), expected.clone())
        }
        Error::Io { path, source } => (path.clone(), String::new(), None, source.to_string()),
        Error::Invalid(m) => (String::new(), String::new(), None, m.clone()),
    };
    let message = e.to_string();
    let build = || -> PyResult<PyErr> {
        let cls = py.import("pktsim.errors")?.getattr("ScenarioError")?;
        let exc = cls.call1((message.clone(),))?;
        exc.setattr("origin", origin)?;
        exc.setattr("path", path)?;
        exc.setattr("value", value)?;
        exc.setattr("expected", expected)?;
        Ok(PyErr::from_value(exc))
    };
    build().unwrap_or_else(|_| PyValueError::new_err(message))
}

fn json<T: serde::Serialize>(v: &T) -> PyResult<String> {
    serde_json::to_string(v).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// A value as Python objects, or (`as_json`) as the JSON text of the `--json` contract.
fn out<'py, T: serde::Serialize>(py: Python<'py>, v: &T, as_json: bool) -> PyResult<Bound<'py, PyAny>> {
    if as_json {
        Ok(PyString::new(py, &json(v)?).into_any())
    } else {
        pyser::to_py(py, v)
    }
}

/// A scenario's text, parsed once (TOML or JSON into a table). Each `resolve` applies its
/// overrides to a copy of the table and validates the result without reading the text
/// again: a sweep parses its scenario once per process and resolves each point once.
#[pyclass(frozen, module = "pktsim._core")]
struct Parsed {
    table: toml::Table,
    origin: String,
    base_dir: PathBuf,
}

#[pymethods]
impl Parsed {
    #[new]
    #[pyo3(signature = (text, format, origin, base_dir))]
    fn new(py: Python<'_>, text: &str, format: &str, origin: &str, base_dir: &str) -> PyResult<Self> {
        let table = match format {
            "toml" => loader::parse_toml_table(text, origin),
            "json" => loader::parse_json_table(text, origin),
            other => Err(Error::Invalid(format!("unknown scenario format {other:?} (toml or json)"))),
        }
        .map_err(|e| to_pyerr(py, e))?;
        Ok(Parsed { table, origin: origin.to_string(), base_dir: PathBuf::from(base_dir) })
    }

    /// `cost.profile` as written in the text, when it is a string (None otherwise).
    #[getter]
    fn profile(&self) -> Option<String> {
        self.table.get("cost")?.as_table()?.get("profile")?.as_str().map(str::to_string)
    }

    /// Whether the text is a chain of nodes (it has `[[nodes]]`).
    #[getter]
    fn is_chain(&self) -> bool {
        scenario::chain::is_chain(&self.table)
    }

    /// The scenario with `sets` applied (`[(key, value text), ...]`), validated and resolved;
    /// raises `ScenarioError` as loading the text with those overrides does. A chain file
    /// resolves into a [`Chain`] (`nodes.1.host.t_proc` sets a key of node 1).
    fn resolve(&self, py: Python<'_>, sets: Vec<(String, String)>) -> PyResult<Py<PyAny>> {
        let table = self.table.clone();
        if scenario::chain::is_chain(&table) {
            let c = scenario::chain::load_table(table, &self.origin, &self.base_dir, &sets);
            return Ok(Py::new(py, Chain { c: c.map_err(|e| to_pyerr(py, e))? })?.into_any());
        }
        let resolved = Scenario::load_table(table, &self.origin, &self.base_dir, &sets);
        Ok(Py::new(py, Resolved { sc: resolved.map_err(|e| to_pyerr(py, e))? })?.into_any())
    }
}

/// A validated chain of nodes, ready to run or model: the methods of [`Resolved`].
#[pyclass(frozen, module = "pktsim._core")]
struct Chain {
    c: scenario::chain::ResolvedChain,
}

#[pymethods]
impl Chain {
    /// The chain: its name, seed, each node's normalised scenario, names and links.
    #[pyo3(signature = (as_json = false))]
    fn data<'py>(&self, py: Python<'py>, as_json: bool) -> PyResult<Bound<'py, PyAny>> {
        out(py, &self.c.data(), as_json)
    }

    #[getter]
    fn seed(&self) -> u64 {
        self.c.seed
    }

    /// The packet rate offered to the first node (pps).
    #[getter]
    fn offered_pps(&self) -> f64 {
        self.c.nodes[0].offered_pps()
    }

    /// The analytical model of every node, the links and the bottleneck.
    #[pyo3(signature = (as_json = false))]
    fn predict<'py>(&self, py: Python<'py>, as_json: bool) -> PyResult<Bound<'py, PyAny>> {
        out(py, &pktsim_core::predict::predict_chain(&self.c), as_json)
    }

    /// The frames the chain's nodes will simulate (pktsim_core::simulate::expected_chain_frames).
    #[getter]
    fn expected_frames(&self) -> f64 {
        pktsim_core::simulate::expected_chain_frames(&self.c)
    }

    /// Simulate the chain: end to end (also at the top level), loss by node, each node.
    /// More than `MAX_FRAMES` frames in all, or more than `MAX_MEMORY_BYTES` of memory (the
    /// nodes run at once), only with `allow_large`.
    #[pyo3(signature = (as_json = false, and_json = false, allow_large = false))]
    fn run<'py>(
        &self,
        py: Python<'py>,
        as_json: bool,
        and_json: bool,
        allow_large: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        if !allow_large {
            pktsim_core::simulate::check_chain_work(&self.c).map_err(|e| to_pyerr(py, e))?;
        }
        let r = on_engine_thread(py, |flag| pktsim_core::simulate::run_chain(&self.c, flag))?;
        if and_json && !as_json {
            let pair = (pyser::to_py(py, &r)?, json(&r)?);
            return pair.into_pyobject(py).map(|t| t.into_any());
        }
        out(py, &r, as_json)
    }
}

/// A validated scenario, ready to run or model.
#[pyclass(frozen, module = "pktsim._core")]
struct Resolved {
    sc: ResolvedScenario,
}

#[pymethods]
impl Resolved {
    /// The scenario, normalised (every default filled in, every unit written out).
    #[pyo3(signature = (as_json = false))]
    fn data<'py>(&self, py: Python<'py>, as_json: bool) -> PyResult<Bound<'py, PyAny>> {
        out(py, &self.sc.scenario, as_json)
    }

    #[getter]
    fn seed(&self) -> u64 {
        self.sc.scenario.seed
    }

    /// The offered packet rate as the model computes it (pps; the line rate when none is given).
    #[getter]
    fn offered_pps(&self) -> f64 {
        self.sc.offered_pps()
    }

    /// The frames a run will simulate (pktsim_core::simulate::expected_frames).
    #[getter]
    fn expected_frames(&self) -> f64 {
        pktsim_core::simulate::expected_frames(&self.sc)
    }

    /// The analytical prediction (000).
    #[pyo3(signature = (as_json = false))]
    fn predict<'py>(&self, py: Python<'py>, as_json: bool) -> PyResult<Bound<'py, PyAny>> {
        out(py, &pktsim_core::predict::predict(&self.sc), as_json)
    }

    /// Simulate: the `pktsim run --json` object as a dict (or, with `as_json`, its text;
    /// with `and_json`, the pair (dict, text): a sweep's checkpoint saves the text, which
    /// serde_json writes far faster than Python's json module would).
    /// The engine runs on a thread of its own with the GIL released; this thread looks at
    /// the interpreter's signals every 10 ms, so Ctrl-C (SIGINT) stops the run within
    /// milliseconds, whatever the scenario, and raises KeyboardInterrupt.
    /// More than `MAX_FRAMES` frames or `MAX_MEMORY_BYTES` of memory only with `allow_large`.
    #[pyo3(signature = (as_json = false, and_json = false, allow_large = false))]
    fn run<'py>(
        &self,
        py: Python<'py>,
        as_json: bool,
        and_json: bool,
        allow_large: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        if !allow_large {
            pktsim_core::simulate::check_node_work(&self.sc).map_err(|e| to_pyerr(py, e))?;
        }
        let r = simulate(py, &self.sc)?;
        if and_json && !as_json {
            let pair = (pyser::to_py(py, &r)?, json(&r)?);
            return pair.into_pyobject(py).map(|t| t.into_any());
        }
        out(py, &r, as_json)
    }
}

/// How often the interpreter's signals are looked at while the engine runs.
const SIGNAL_POLL: std::time::Duration = std::time::Duration::from_millis(10);

fn simulate(py: Python<'_>, sc: &ResolvedScenario) -> PyResult<SimResult> {
    on_engine_thread(py, |flag| pktsim_core::simulate::run(sc, flag))
}

/// Whether a signal can stop a run on this thread: only the main thread runs Python's
/// signal handlers, and only a Python handler (for SIGINT or SIGTERM) raises there. A
/// sweep's pool worker leaves both to its parent, which ends it; a Dask task runs on a
/// worker thread, where looking at signals does nothing. A signal that came just before
/// (its handler runs while this looks, in Python code) is the caller's error: the run does
/// not start. (Dropped, it left a Ctrl-C right after a long run's notice unheard.)
fn interruptible(py: Python<'_>) -> PyResult<bool> {
    let check = || -> PyResult<bool> {
        let threading = py.import("threading")?;
        if !threading.call_method0("current_thread")?.is(&threading.call_method0("main_thread")?) {
            return Ok(false);
        }
        let signal = py.import("signal")?;
        for name in ["SIGINT", "SIGTERM"] {
            if signal.call_method1("getsignal", (signal.getattr(name)?,))?.is_callable() {
                return Ok(true);
            }
        }
        Ok(false)
    };
    let can = check()?;
    if can {
        py.check_signals()?;
    }
    Ok(can)
}

/// Run `work` (given the stop flag) with the GIL released: where a signal can stop it, on
/// a thread of its own while this one looks at the interpreter's signals every 10 ms; else
/// on this thread (handing a run to another thread and back costs 50 – 70 us on a virtual
/// machine, a third of what a short sweep point spends outside its simulation).
fn on_engine_thread<T: Send>(
    py: Python<'_>,
    work: impl FnOnce(Arc<AtomicBool>) -> pktsim_core::Result<T> + Send,
) -> PyResult<T> {
    if !interruptible(py)? {
        let run = py.detach(|| {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(Arc::new(AtomicBool::new(false)))))
        });
        return run.map_err(|_| engine_bug())?.map_err(|e| to_pyerr(py, e));
    }
    let cancel = Arc::new(AtomicBool::new(false));
    let mut interrupted: Option<PyErr> = None;
    let result = py.detach(|| {
        std::thread::scope(|scope| {
            let (done_tx, done_rx) = mpsc::channel::<()>();
            let flag = cancel.clone();
            let engine = scope.spawn(move || {
                let r = work(flag);
                let _ = done_tx.send(());
                r
            });
            // Until the engine is done (or gone): look at the signals every SIGNAL_POLL.
            while let Err(mpsc::RecvTimeoutError::Timeout) = done_rx.recv_timeout(SIGNAL_POLL) {
                if interrupted.is_none() {
                    if let Err(e) = Python::attach(|py| py.check_signals()) {
                        interrupted = Some(e);
                        cancel.store(true, Ordering::Relaxed);
                    }
                }
            }
            engine.join()
        })
    });
    if let Some(e) = interrupted {
        return Err(e);
    }
    result.map_err(|_| engine_bug())?.map_err(|e| to_pyerr(py, e))
}

fn engine_bug() -> PyErr {
    PyValueError::new_err("pktsim's engine stopped unexpectedly (a bug: please report it with the scenario)")
}

/// `pktsim.values.flatten`: one level of keys (`{"a": {"b": 1}}` -> `{"a_b": 1}`), lists
/// and tuples dropped. Every sweep row and long-table row goes through it; plain dicts,
/// lists and scalars are told apart by their exact type, anything else as Python would
/// (`isinstance(v, collections.abc.Mapping)`, then list or tuple).
#[pyfunction]
#[pyo3(signature = (d, prefix = ""))]
fn flatten<'py>(py: Python<'py>, d: &Bound<'py, PyAny>, prefix: &str) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    let mapping = py.import("collections.abc")?.getattr("Mapping")?;
    flatten_into(&out, d, prefix, &mapping)?;
    Ok(out)
}

fn flatten_into<'py>(
    out: &Bound<'py, PyDict>,
    d: &Bound<'py, PyAny>,
    prefix: &str,
    mapping: &Bound<'py, PyAny>,
) -> PyResult<()> {
    let one = |k: Bound<'py, PyAny>, v: Bound<'py, PyAny>| -> PyResult<()> {
        let key = || -> PyResult<String> { Ok(format!("{prefix}{}", k.str()?.to_str()?)) };
        if v.is_exact_instance_of::<PyDict>() {
            return flatten_into(out, &v, &(key()? + "_"), mapping);
        }
        let scalar = v.is_exact_instance_of::<PyFloat>()
            || v.is_exact_instance_of::<PyInt>()
            || v.is_exact_instance_of::<PyString>()
            || v.is_exact_instance_of::<PyBool>()
            || v.is_none();
        if scalar {
            return out.set_item(key()?, v);
        }
        if v.is_exact_instance_of::<PyList>() || v.is_exact_instance_of::<PyTuple>() {
            return Ok(());
        }
        if v.is_instance(mapping)? {
            return flatten_into(out, &v, &(key()? + "_"), mapping);
        }
        if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
            return Ok(());
        }
        out.set_item(key()?, v)
    };
    if let Ok(dict) = d.cast_exact::<PyDict>() {
        for (k, v) in dict.iter() {
            one(k, v)?;
        }
    } else {
        for item in d.call_method0("items")?.try_iter()? {
            let (k, v): (Bound<'py, PyAny>, Bound<'py, PyAny>) = item?.extract()?;
            one(k, v)?;
        }
    }
    Ok(())
}

/// 000 Eq. 3: cycles per packet from a measured rate and CPU load (or active cycles).
#[pyfunction]
#[pyo3(signature = (rate_pps, frequency_hz, cpu_load=None, active_cycles_per_s=None))]
fn from_measurement(
    rate_pps: f64,
    frequency_hz: f64,
    cpu_load: Option<f64>,
    active_cycles_per_s: Option<f64>,
) -> PyResult<String> {
    let m = model::from_measurement(rate_pps, frequency_hz, cpu_load, active_cycles_per_s)
        .map_err(PyValueError::new_err)?;
    json(&m)
}

/// Parse a quantity with its unit; returns the value in base units (ps, Hz, bit/s, pps, B,
/// cycles, cycles/B, fraction). `kind` is one of duration, frequency, bitrate, packetrate,
/// bytes, cycles, cycles_per_byte, percent.
#[pyfunction]
fn parse_quantity(kind: &str, text: &str) -> PyResult<f64> {
    use pktsim_core::units::*;
    let r = match kind {
        "duration" => Duration::parse(text).map(|d| d.ps as f64),
        "frequency" => Frequency::parse(text).map(|f| f.hz),
        "bitrate" => BitRate::parse(text).map(|b| b.bps),
        "packetrate" => PacketRate::parse(text).map(|p| p.pps),
        "bytes" => Bytes::parse(text).map(|b| b.bytes as f64),
        "cycles" => Cycles::parse(text).map(|c| c.cycles),
        "cycles_per_byte" => CyclesPerByte::parse(text).map(|c| c.cycles_per_byte),
        "percent" => Percent::parse(text).map(|p| p.fraction),
        other => return Err(PyValueError::new_err(format!("unknown quantity kind {other:?}"))),
    };
    r.map_err(|e| PyValueError::new_err(e.to_string()))
}

/// JSON Schema of the scenario (`"scenario"`) or cost-profile (`"profile"`) format.
#[pyfunction]
fn schema(which: &str) -> PyResult<String> {
    match which {
        "scenario" => json(&scenario::json_schema()),
        "profile" => json(&scenario::profile_json_schema()),
        other => Err(PyValueError::new_err(format!("unknown schema {other:?} (scenario or profile)"))),
    }
}

/// Names of the bundled cost profiles.
/// `pktsim trace-info`: a pcap or pcapng file at a glance, as JSON text.
#[pyfunction]
fn trace_info(py: Python<'_>, path: &str) -> PyResult<String> {
    let s = pktsim_core::trace::TraceSummary::scan(std::path::Path::new(path), Default::default())
        .map_err(|e| to_pyerr(py, e))?;
    json(&s.info())
}

#[pyfunction]
fn bundled_profiles() -> Vec<&'static str> {
    pktsim_core::cost::bundled_names()
}

/// Text of a bundled cost profile.
#[pyfunction]
fn bundled_profile_text(name: &str) -> PyResult<&'static str> {
    pktsim_core::cost::BUNDLED
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| *t)
        .ok_or_else(|| PyValueError::new_err(format!("no bundled profile {name:?}")))
}

/// The FIB model fitted to two rows of 000 Table IV (the defaults' origin).
#[pyfunction]
fn fib_table_iv_fit() -> PyResult<String> {
    use pktsim_core::fib::*;
    use pktsim_core::units::Bytes;
    let caches = Caches::default();
    let fit = fit_000_table_iv(TABLE_IV_FIT, Bytes::new(64), &caches, 3.3e9).map_err(PyValueError::new_err)?;
    json(&fit)
}

/// SVG flame graph of folded stacks, frames coloured by `colors` (name -> (r, g, b)).
#[pyfunction]
#[pyo3(signature = (folded, colors, title, count_name, legend = Vec::new()))]
fn flamegraph_svg(
    folded: Vec<String>,
    colors: Vec<(String, (u8, u8, u8))>,
    title: &str,
    count_name: &str,
    legend: Vec<(String, (u8, u8, u8))>,
) -> PyResult<String> {
    let rgb = |v: Vec<(String, (u8, u8, u8))>| -> Vec<(String, [u8; 3])> {
        v.into_iter().map(|(n, (r, g, b))| (n, [r, g, b])).collect()
    };
    pktsim_core::flame::svg_with_legend(&folded, &rgb(colors), title, count_name, &rgb(legend))
        .map_err(PyValueError::new_err)
}

/// Two-sided 95% quantile of Student's t with `df` degrees of freedom.
#[pyfunction]
fn student_t95(df: usize) -> f64 {
    pktsim_core::engine::stats::student_t95(df)
}

/// The testbed's generator and sink (`pktsim-tb ARGS...`), run in this process: the exit
/// status. A `pip install` of pktsim thus brings `pktsim-tb` along (its entry point is
/// `pktsim._tb:main`).
#[pyfunction]
fn testbed_main(py: Python<'_>, args: Vec<String>) -> u8 {
    py.detach(|| pktsim_testbed::run(args.into_iter().map(std::ffi::OsString::from)))
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("VERSION", pktsim_core::VERSION)?;
    m.add("MAX_FRAMES", pktsim_core::simulate::MAX_FRAMES)?;
    m.add("LONG_FRAMES", pktsim_core::simulate::LONG_FRAMES)?;
    m.add_class::<Parsed>()?;
    m.add_class::<Resolved>()?;
    m.add_class::<Chain>()?;
    m.add_function(wrap_pyfunction!(testbed_main, m)?)?;
    m.add_function(wrap_pyfunction!(from_measurement, m)?)?;
    m.add_function(wrap_pyfunction!(parse_quantity, m)?)?;
    m.add_function(wrap_pyfunction!(schema, m)?)?;
    m.add_function(wrap_pyfunction!(bundled_profiles, m)?)?;
    m.add_function(wrap_pyfunction!(trace_info, m)?)?;
    m.add_function(wrap_pyfunction!(bundled_profile_text, m)?)?;
    m.add_function(wrap_pyfunction!(fib_table_iv_fit, m)?)?;
    m.add_function(wrap_pyfunction!(flamegraph_svg, m)?)?;
    m.add_function(wrap_pyfunction!(student_t95, m)?)?;
    m.add_function(wrap_pyfunction!(flatten, m)?)?;
    Ok(())
}
