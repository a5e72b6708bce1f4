//! eBPF programs for the testbed, assembled here and loaded with the `bpf(2)` system call:
//! no compiler, no object file, nothing installed besides pktsim-tb.
//!
//! Three XDP programs, each a handful of instructions:
//! - [`Program::Pass`]: `return XDP_PASS` (on a veth whose peer redirects into it: veth's
//!   `ndo_xdp_xmit` needs the receiving end's NAPI, which an XDP program turns on);
//! - [`Program::Redirect`]: `for (i = loops; i; i--) ; return bpf_redirect_map(&devmap, 0, 0)`,
//!   the devmap's one entry being the egress interface (XDP_REDIRECT through a devmap); the
//!   empty loop is the testbed's cost dial (a bounded loop: the verifier walks it once per
//!   iteration, so it is limited to [`MAX_LOOPS`]);
//! - [`Program::Xsk`]: the same loop, then `return bpf_redirect_map(&xskmap,
//!   ctx->rx_queue_index, XDP_PASS)`, an AF_XDP socket per queue.
//!
//! Programs are attached in native (driver) mode through a BPF link
//! (`BPF_LINK_CREATE`, `BPF_XDP`): the link is a file descriptor of this process, so the
//! program leaves the interface when the process ends, however it ends (SIGKILL too).
//!
//! And three tracepoint programs that time spans on one CPU, each kind of span in a
//! one-entry array map ([`SPAN_VALUE_SIZE`] bytes of u64 words, see [`SpanSums`]) that
//! sums them per task class: [`CLASS_IDLE`] (pid 0), [`CLASS_KSOFTIRQD`], the tasks named
//! ([`CLASS_TASKS`] on, see [`TaskPids`]), [`CLASS_OTHER`]. Two time a softirq or an
//! interrupt:
//! - [`Program::SpanEntry`], on the span's entry tracepoint: note `bpf_ktime_get_ns()` and
//!   the class of the current task;
//! - [`Program::SpanExit`], on its exit tracepoint: if a start is noted, add now - start
//!   to the class's sum and 1 to its count, and clear the start (an exit without an
//!   entry, the span under way when the programs were attached, is ignored).
//!
//! The third, [`Program::Switch`] on `sched:sched_switch`, times what each task runs: at
//! every switch, if a start is noted, it adds now - start to the class of the task
//! switched out (the record's `prev_pid`) and 1 to its count, then notes now as the start
//! of the next task's span. The span before the first switch seen (the task running when
//! the program was attached) and the one under way at the end are not counted.
//!
//! A program on a tracepoint runs on every CPU that hits it, whatever CPU its perf event
//! was opened on, so each first returns unless `bpf_get_smp_processor_id()` is the CPU
//! measured; on that CPU entry and exit run one after the other, never at once. Optionally
//! the span programs look only at one softirq vector (the record's `unsigned int vec`, at
//! offset 8).
//! Tracepoint perf events hold the programs (`perf_event_open`, `PERF_EVENT_IOC_SET_BPF`):
//! they are file descriptors of this process too.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::args::MAX_TASKS;

// bpf(2) commands (include/uapi/linux/bpf.h, enum bpf_cmd).
const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;

// enum bpf_map_type, enum bpf_prog_type, enum bpf_attach_type.
pub const BPF_MAP_TYPE_ARRAY: u32 = 2;
pub const BPF_MAP_TYPE_DEVMAP: u32 = 14;
pub const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_TRACEPOINT: u32 = 5;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
/// XDP_FLAGS_DRV_MODE (include/uapi/linux/if_link.h): native XDP, in the driver.
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// XDP actions (enum xdp_action).
pub const XDP_PASS: i32 = 2;

// Helpers (enum bpf_func_id).
const BPF_FUNC_MAP_LOOKUP_ELEM: i32 = 1;
const BPF_FUNC_KTIME_GET_NS: i32 = 5;
const BPF_FUNC_GET_SMP_PROCESSOR_ID: i32 = 8;
const BPF_FUNC_GET_CURRENT_PID_TGID: i32 = 14;
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
/// `struct xdp_md` field offset of `rx_queue_index` (data, data_end, data_meta,
/// ingress_ifindex, rx_queue_index: five u32).
const XDP_MD_RX_QUEUE_INDEX: i16 = 16;
/// `src_reg` of a 64-bit immediate load that names a map by file descriptor.
const BPF_PSEUDO_MAP_FD: u8 = 1;

/// Offset of a softirq tracepoint record's `unsigned int vec` (after the 8 bytes of common
/// fields, whose first 8 bytes a BPF program may not read: the kernel keeps a pointer
/// there).
pub const SOFTIRQ_VEC_OFFSET: i16 = 8;
/// The NET_RX softirq's vector (NET_RX_SOFTIRQ).
pub const NET_RX_SOFTIRQ: u32 = 3;
/// Offset of a sched_switch record's `pid_t prev_pid`, the task switched out (after
/// `char prev_comm[16]` at 8).
pub const SWITCH_PREV_PID_OFFSET: i16 = 24;

/// Task classes of a span: the idle task (pid 0), ksoftirqd, the [`MAX_TASKS`] tasks
/// named (the i-th is class `CLASS_TASKS + i`), any other task.
pub const CLASS_IDLE: usize = 0;
pub const CLASS_KSOFTIRQD: usize = 1;
pub const CLASS_TASKS: usize = 2;
pub const CLASS_OTHER: usize = CLASS_TASKS + MAX_TASKS;
/// Number of task classes.
pub const CLASSES: usize = CLASS_OTHER + 1;
/// Byte offsets in a span map's value: the start (0: none), the class noted with it
/// (unused by [`Program::Switch`]), then per class its sum of ns and its count.
const SPAN_START: i16 = 0;
const SPAN_CLASS: i16 = 8;
const SPAN_SUMS: i16 = 16;
/// Size of a span map's value: start, class, and a (sum, count) pair per class.
pub const SPAN_VALUE_SIZE: u32 = 16 + 16 * CLASSES as u32;

/// Most iterations of the redirect program's cost loop (2 instructions each, far below
/// the verifier's limit of a million processed instructions).
pub const MAX_LOOPS: u32 = 100_000;

/// One eBPF instruction (`struct bpf_insn`): opcode, dst and src registers (4 bits
/// each, dst in the low nibble), offset, immediate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

impl Insn {
    const fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Self {
        Insn { code, regs: (src << 4) | (dst & 0x0f), off, imm }
    }
    /// `dst = imm` (BPF_ALU64 | BPF_MOV | BPF_K).
    pub const fn mov64_imm(dst: u8, imm: i32) -> Self {
        Self::new(0xb7, dst, 0, 0, imm)
    }
    /// `dst = src` (BPF_ALU64 | BPF_MOV | BPF_X).
    pub const fn mov64_reg(dst: u8, src: u8) -> Self {
        Self::new(0xbf, dst, src, 0, 0)
    }
    /// `dst = (u32)src`, the upper half cleared (BPF_ALU | BPF_MOV | BPF_X).
    pub const fn mov32_reg(dst: u8, src: u8) -> Self {
        Self::new(0xbc, dst, src, 0, 0)
    }
    /// `dst += imm` (BPF_ALU64 | BPF_ADD | BPF_K).
    pub const fn add64_imm(dst: u8, imm: i32) -> Self {
        Self::new(0x07, dst, 0, 0, imm)
    }
    /// `dst += src` (BPF_ALU64 | BPF_ADD | BPF_X).
    pub const fn add64_reg(dst: u8, src: u8) -> Self {
        Self::new(0x0f, dst, src, 0, 0)
    }
    /// `dst -= imm` (BPF_ALU64 | BPF_SUB | BPF_K).
    pub const fn sub64_imm(dst: u8, imm: i32) -> Self {
        Self::new(0x17, dst, 0, 0, imm)
    }
    /// `dst -= src` (BPF_ALU64 | BPF_SUB | BPF_X).
    pub const fn sub64_reg(dst: u8, src: u8) -> Self {
        Self::new(0x1f, dst, src, 0, 0)
    }
    /// `dst <<= imm` (BPF_ALU64 | BPF_LSH | BPF_K).
    pub const fn lsh64_imm(dst: u8, imm: i32) -> Self {
        Self::new(0x67, dst, 0, 0, imm)
    }
    /// `if dst == imm goto pc + 1 + off` (BPF_JMP | BPF_JEQ | BPF_K).
    pub const fn jeq_imm(dst: u8, imm: i32, off: i16) -> Self {
        Self::new(0x15, dst, 0, off, imm)
    }
    /// `if dst > imm goto pc + 1 + off`, unsigned (BPF_JMP | BPF_JGT | BPF_K).
    pub const fn jgt_imm(dst: u8, imm: i32, off: i16) -> Self {
        Self::new(0x25, dst, 0, off, imm)
    }
    /// `if dst != imm goto pc + 1 + off` (BPF_JMP | BPF_JNE | BPF_K).
    pub const fn jne_imm(dst: u8, imm: i32, off: i16) -> Self {
        Self::new(0x55, dst, 0, off, imm)
    }
    /// `dst = *(u32 *)(src + off)` (BPF_LDX | BPF_MEM | BPF_W).
    pub const fn ldx_w(dst: u8, src: u8, off: i16) -> Self {
        Self::new(0x61, dst, src, off, 0)
    }
    /// `dst = *(u64 *)(src + off)` (BPF_LDX | BPF_MEM | BPF_DW).
    pub const fn ldx_dw(dst: u8, src: u8, off: i16) -> Self {
        Self::new(0x79, dst, src, off, 0)
    }
    /// `*(u64 *)(dst + off) = src` (BPF_STX | BPF_MEM | BPF_DW).
    pub const fn stx_dw(dst: u8, off: i16, src: u8) -> Self {
        Self::new(0x7b, dst, src, off, 0)
    }
    /// `*(u32 *)(dst + off) = imm` (BPF_ST | BPF_MEM | BPF_W).
    pub const fn st_w(dst: u8, off: i16, imm: i32) -> Self {
        Self::new(0x62, dst, 0, off, imm)
    }
    /// `*(u64 *)(dst + off) = imm`, sign-extended (BPF_ST | BPF_MEM | BPF_DW).
    pub const fn st_dw(dst: u8, off: i16, imm: i32) -> Self {
        Self::new(0x7a, dst, 0, off, imm)
    }
    /// `dst = map` by file descriptor: two instructions (BPF_LD | BPF_DW | BPF_IMM).
    pub const fn ld_map_fd(dst: u8, fd: i32) -> [Self; 2] {
        [Self::new(0x18, dst, BPF_PSEUDO_MAP_FD, 0, fd), Self::new(0, 0, 0, 0, 0)]
    }
    /// `call helper` (BPF_JMP | BPF_CALL).
    pub const fn call(helper: i32) -> Self {
        Self::new(0x85, 0, 0, 0, helper)
    }
    /// `return r0` (BPF_JMP | BPF_EXIT).
    pub const fn exit() -> Self {
        Self::new(0x95, 0, 0, 0, 0)
    }
    /// The instruction's 8 bytes as the kernel reads them (little-endian machine).
    pub fn to_bytes(self) -> [u8; 8] {
        let mut b = [0u8; 8];
        b[0] = self.code;
        b[1] = self.regs;
        b[2..4].copy_from_slice(&self.off.to_ne_bytes());
        b[4..8].copy_from_slice(&self.imm.to_ne_bytes());
        b
    }
}

/// The pids that name task classes, patched into the programs as constants: ksoftirqd's
/// ([`CLASS_KSOFTIRQD`]) and up to [`MAX_TASKS`] tasks' (the i-th [`CLASS_TASKS`] + i).
/// Pid 0 is the idle task's ([`CLASS_IDLE`]); a pid named nowhere is [`CLASS_OTHER`]'s.
/// The pids are distinct and none is 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TaskPids {
    pub ksoftirqd: Option<u32>,
    pub tasks: [Option<u32>; MAX_TASKS],
}

impl TaskPids {
    /// ksoftirqd's pid and the first [`MAX_TASKS`] of `tasks`, in order.
    pub fn new(ksoftirqd: Option<u32>, tasks: &[u32]) -> Self {
        let mut named = [None; MAX_TASKS];
        for (slot, &pid) in named.iter_mut().zip(tasks) {
            *slot = Some(pid);
        }
        TaskPids { ksoftirqd, tasks: named }
    }
}

/// The testbed's programs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Program {
    /// `XDP_PASS`.
    Pass,
    /// Redirect every frame through entry 0 of a devmap, after `loops` turns of an empty
    /// loop.
    Redirect { devmap_fd: i32, loops: u32 },
    /// Redirect every frame to the AF_XDP socket of its rx queue (XDP_PASS without one),
    /// after `loops` turns of an empty loop.
    Xsk { xskmap_fd: i32, loops: u32 },
    /// Tracepoint, a span's entry on `cpu` (of softirq vector `vec` only, if given): note
    /// the time and the current task's class by `pids` in the span map.
    SpanEntry { map_fd: i32, cpu: u32, vec: Option<u32>, pids: TaskPids },
    /// Tracepoint, a span's exit on `cpu` (of softirq vector `vec` only, if given): add
    /// the span since the noted entry to its class, clear the entry.
    SpanExit { map_fd: i32, cpu: u32, vec: Option<u32> },
    /// Tracepoint `sched:sched_switch` on `cpu`: add the span since the last switch to
    /// the class by `pids` of the task switched out, note the time as the next start.
    Switch { map_fd: i32, cpu: u32, pids: TaskPids },
}

impl Program {
    /// The program's instructions.
    pub fn insns(self) -> Vec<Insn> {
        match self {
            Program::Pass => vec![Insn::mov64_imm(0, XDP_PASS), Insn::exit()],
            Program::Redirect { devmap_fd, loops } => {
                let mut v = cost_loop(loops);
                v.extend(Insn::ld_map_fd(1, devmap_fd));
                v.extend([
                    Insn::mov64_imm(2, 0),
                    Insn::mov64_imm(3, 0),
                    Insn::call(BPF_FUNC_REDIRECT_MAP),
                    Insn::exit(),
                ]);
                v
            }
            Program::Xsk { xskmap_fd, loops } => {
                let mut v = cost_loop(loops);
                // r1 is the context until the map load overwrites it: read the queue first.
                v.push(Insn::ldx_w(2, 1, XDP_MD_RX_QUEUE_INDEX));
                v.extend(Insn::ld_map_fd(1, xskmap_fd));
                v.extend([Insn::mov64_imm(3, XDP_PASS), Insn::call(BPF_FUNC_REDIRECT_MAP), Insn::exit()]);
                v
            }
            Program::SpanEntry { map_fd, cpu, vec, pids } => {
                let (mut v, mut to_end) = (Vec::new(), Vec::new());
                span_prologue(&mut v, &mut to_end, cpu, vec);
                v.extend([
                    Insn::call(BPF_FUNC_GET_CURRENT_PID_TGID),
                    Insn::mov32_reg(0, 0), // the thread id: the low half
                ]);
                classify(&mut v, 0, pids);
                span_lookup(&mut v, &mut to_end, map_fd);
                v.extend([
                    Insn::mov64_reg(9, 0),
                    Insn::stx_dw(9, SPAN_CLASS, 7),
                    Insn::call(BPF_FUNC_KTIME_GET_NS),
                    Insn::stx_dw(9, SPAN_START, 0),
                ]);
                span_epilogue(v, &to_end)
            }
            Program::SpanExit { map_fd, cpu, vec } => {
                let (mut v, mut to_end) = (Vec::new(), Vec::new());
                span_prologue(&mut v, &mut to_end, cpu, vec);
                v.extend([Insn::call(BPF_FUNC_KTIME_GET_NS), Insn::mov64_reg(8, 0)]);
                span_lookup(&mut v, &mut to_end, map_fd);
                v.push(Insn::ldx_dw(1, 0, SPAN_START));
                to_end.push(v.len());
                v.push(Insn::jeq_imm(1, 0, 0)); // no entry noted
                v.extend([Insn::st_dw(0, SPAN_START, 0), Insn::sub64_reg(8, 1), Insn::ldx_dw(2, 0, SPAN_CLASS)]);
                span_add(&mut v, &mut to_end, 2);
                span_epilogue(v, &to_end)
            }
            Program::Switch { map_fd, cpu, pids } => {
                // r1 is the context (the tracepoint record) until the first call.
                let (mut v, mut to_end) = (vec![Insn::ldx_w(6, 1, SWITCH_PREV_PID_OFFSET)], Vec::new());
                span_prologue(&mut v, &mut to_end, cpu, None);
                classify(&mut v, 6, pids);
                v.extend([Insn::call(BPF_FUNC_KTIME_GET_NS), Insn::mov64_reg(8, 0)]);
                span_lookup(&mut v, &mut to_end, map_fd);
                v.extend([Insn::ldx_dw(1, 0, SPAN_START), Insn::stx_dw(0, SPAN_START, 8)]);
                to_end.push(v.len());
                v.push(Insn::jeq_imm(1, 0, 0)); // the first switch seen: no span before it
                v.push(Insn::sub64_reg(8, 1));
                span_add(&mut v, &mut to_end, 7);
                span_epilogue(v, &to_end)
            }
        }
    }

    /// The program type and expected attach type it is loaded with.
    fn kind(self) -> (u32, u32) {
        match self {
            Program::Pass | Program::Redirect { .. } | Program::Xsk { .. } => (BPF_PROG_TYPE_XDP, BPF_XDP),
            Program::SpanEntry { .. } | Program::SpanExit { .. } | Program::Switch { .. } => {
                (BPF_PROG_TYPE_TRACEPOINT, 0)
            }
        }
    }

    /// The name the program carries in the kernel (`bpftool prog` shows it).
    pub fn name(self) -> &'static CStr {
        match self {
            Program::Pass => c"pktsim_pass",
            Program::Redirect { .. } => c"pktsim_redirect",
            Program::Xsk { .. } => c"pktsim_xsk",
            Program::SpanEntry { .. } => c"pktsim_span_in",
            Program::SpanExit { .. } => c"pktsim_span_out",
            Program::Switch { .. } => c"pktsim_switch",
        }
    }
}

/// The start of the tracepoint programs: return unless on `cpu` (and, with `vec`, unless
/// the record's softirq vector is `vec`). Notes in `to_end` the indices of the jumps to
/// the end, whose offsets [`span_epilogue`] fills in.
fn span_prologue(v: &mut Vec<Insn>, to_end: &mut Vec<usize>, cpu: u32, vec: Option<u32>) {
    if let Some(vec) = vec {
        // r1 is the context (the tracepoint record) until the first call.
        v.push(Insn::ldx_w(1, 1, SOFTIRQ_VEC_OFFSET));
        to_end.push(v.len());
        v.push(Insn::jne_imm(1, vec as i32, 0));
    }
    v.push(Insn::call(BPF_FUNC_GET_SMP_PROCESSOR_ID));
    to_end.push(v.len());
    v.push(Insn::jne_imm(0, cpu as i32, 0));
}

/// `r7 = class of the pid in r{pid}` by `pids`: a chain of compares, each skipping the
/// move of its class unless the pid is its (the pids being distinct, at most one moves).
fn classify(v: &mut Vec<Insn>, pid: u8, pids: TaskPids) {
    v.extend([Insn::mov64_imm(7, CLASS_OTHER as i32), Insn::jne_imm(pid, 0, 1), Insn::mov64_imm(7, CLASS_IDLE as i32)]);
    if let Some(p) = pids.ksoftirqd {
        v.extend([Insn::jne_imm(pid, p as i32, 1), Insn::mov64_imm(7, CLASS_KSOFTIRQD as i32)]);
    }
    for (i, p) in pids.tasks.iter().enumerate() {
        if let Some(p) = p {
            v.extend([Insn::jne_imm(pid, *p as i32, 1), Insn::mov64_imm(7, (CLASS_TASKS + i) as i32)]);
        }
    }
}

/// With r0 the map value, r8 a span and r{class} its class: add the span to the class's
/// sum and 1 to its count, returning first when the class is out of range (it never is,
/// but the verifier bounds the offset with this check).
fn span_add(v: &mut Vec<Insn>, to_end: &mut Vec<usize>, class: u8) {
    to_end.push(v.len());
    v.push(Insn::jgt_imm(class, CLASSES as i32 - 1, 0));
    v.extend([
        Insn::lsh64_imm(class, 4), // 16 bytes per class
        Insn::add64_reg(0, class),
        Insn::ldx_dw(1, 0, SPAN_SUMS),
        Insn::add64_reg(1, 8),
        Insn::stx_dw(0, SPAN_SUMS, 1),
        Insn::ldx_dw(1, 0, SPAN_SUMS + 8),
        Insn::add64_imm(1, 1),
        Insn::stx_dw(0, SPAN_SUMS + 8, 1),
    ]);
}

/// `r0 = bpf_map_lookup_elem(map, &(u32){0})`, returning when it is null (it never is:
/// an array's entry 0 always exists, but the verifier wants the check).
fn span_lookup(v: &mut Vec<Insn>, to_end: &mut Vec<usize>, map_fd: i32) {
    v.extend([Insn::st_w(10, -4, 0), Insn::mov64_reg(2, 10), Insn::add64_imm(2, -4)]);
    v.extend(Insn::ld_map_fd(1, map_fd));
    v.push(Insn::call(BPF_FUNC_MAP_LOOKUP_ELEM));
    to_end.push(v.len());
    v.push(Insn::jeq_imm(0, 0, 0));
}

/// The end of the tracepoint programs, `return 0`, with the jumps at `to_end` pointed at it.
fn span_epilogue(mut v: Vec<Insn>, to_end: &[usize]) -> Vec<Insn> {
    let end = v.len();
    for &j in to_end {
        v[j].off = (end - j - 1) as i16;
    }
    v.extend([Insn::mov64_imm(0, 0), Insn::exit()]);
    v
}

/// `r4 = loops; do r4 -= 1 while (r4 != 0)` (nothing for 0 turns): the cost dial.
fn cost_loop(loops: u32) -> Vec<Insn> {
    if loops == 0 {
        return Vec::new();
    }
    let n = loops.min(MAX_LOOPS) as i32;
    vec![Insn::mov64_imm(4, n), Insn::sub64_imm(4, 1), Insn::jne_imm(4, 0, -2)]
}

/// `union bpf_attr`, as wide as any command here needs; fields are written at their
/// offsets, the rest stays zero (the kernel requires unused bytes to be zero).
#[repr(C, align(8))]
struct Attr([u8; 128]);

impl Attr {
    fn new() -> Self {
        Attr([0; 128])
    }
    fn u32(&mut self, off: usize, v: u32) -> &mut Self {
        self.0[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64(&mut self, off: usize, v: u64) -> &mut Self {
        self.0[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn bytes(&mut self, off: usize, v: &[u8]) -> &mut Self {
        self.0[off..off + v.len()].copy_from_slice(v);
        self
    }
    fn call(&mut self, cmd: libc::c_long) -> io::Result<i32> {
        // SAFETY: the attribute buffer is 128 initialised bytes that outlive the call; every
        // pointer written into it points to memory that also outlives it.
        let rc = unsafe { libc::syscall(libc::SYS_bpf, cmd, self.0.as_mut_ptr(), self.0.len() as libc::c_uint) };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(rc as i32)
        }
    }
}

fn owned(fd: i32) -> OwnedFd {
    // SAFETY: `fd` was just returned by bpf(2) and belongs to nobody else.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// A new map of `map_type` with u32 keys and values and `entries` entries.
pub fn map_create(map_type: u32, entries: u32) -> io::Result<OwnedFd> {
    map_create_sized(map_type, 4, entries)
}

/// A new map of `map_type` with u32 keys, values of `value_size` bytes and `entries`
/// entries.
pub fn map_create_sized(map_type: u32, value_size: u32, entries: u32) -> io::Result<OwnedFd> {
    let fd = Attr::new().u32(0, map_type).u32(4, 4).u32(8, value_size).u32(12, entries).call(BPF_MAP_CREATE)?;
    Ok(owned(fd))
}

/// `value = map[key]` (u32 key; `value` as long as the map's values).
pub fn map_lookup(map: &OwnedFd, key: u32, value: &mut [u8]) -> io::Result<()> {
    let k = key;
    Attr::new()
        .u32(0, map.as_raw_fd() as u32)
        .u64(8, &k as *const u32 as u64)
        .u64(16, value.as_mut_ptr() as u64)
        .call(BPF_MAP_LOOKUP_ELEM)?;
    Ok(())
}

/// `map[key] = value` (u32 key and value).
pub fn map_update(map: &OwnedFd, key: u32, value: u32) -> io::Result<()> {
    let (k, v) = (key, value);
    Attr::new()
        .u32(0, map.as_raw_fd() as u32)
        .u64(8, &k as *const u32 as u64)
        .u64(16, &v as *const u32 as u64)
        .call(BPF_MAP_UPDATE_ELEM)?;
    Ok(())
}

/// Loads `prog` (GPL: bpf_redirect_map is GPL-only). A rejected program
/// is loaded once more with the verifier's log on, and the error carries the log's last
/// lines (the log is off otherwise: a loop's log fills any buffer).
pub fn prog_load(prog: Program) -> io::Result<OwnedFd> {
    load(prog, None).or_else(|e| {
        let mut log = vec![0u8; 1 << 20];
        match load(prog, Some(&mut log)) {
            Ok(fd) => Ok(fd),
            Err(_) => {
                let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                let text = String::from_utf8_lossy(&log[..end]);
                let tail: Vec<&str> = text.lines().rev().take(4).collect::<Vec<_>>().into_iter().rev().collect();
                Err(io::Error::new(e.kind(), format!("{e} (verifier: {})", tail.join("; "))))
            }
        }
    })
}

fn load(prog: Program, log: Option<&mut Vec<u8>>) -> io::Result<OwnedFd> {
    let insns: Vec<u8> = prog.insns().into_iter().flat_map(Insn::to_bytes).collect();
    let license = c"GPL";
    let mut name = [0u8; 16];
    let n = prog.name().to_bytes();
    name[..n.len()].copy_from_slice(n);
    let (prog_type, attach_type) = prog.kind();
    let mut attr = Attr::new();
    attr.u32(0, prog_type)
        .u32(4, (insns.len() / 8) as u32)
        .u64(8, insns.as_ptr() as u64)
        .u64(16, license.as_ptr() as u64)
        .bytes(48, &name)
        .u32(68, attach_type);
    if let Some(log) = log {
        attr.u32(24, 1).u32(28, log.len() as u32).u64(32, log.as_mut_ptr() as u64);
    }
    attr.call(BPF_PROG_LOAD).map(owned)
}

/// Attaches `prog` to interface `ifindex` in native mode; the program stays attached
/// while the returned link is open.
pub fn xdp_link(prog: &OwnedFd, ifindex: u32) -> io::Result<OwnedFd> {
    let fd = Attr::new()
        .u32(0, prog.as_raw_fd() as u32)
        .u32(4, ifindex)
        .u32(8, BPF_XDP)
        .u32(12, XDP_FLAGS_DRV_MODE)
        .call(BPF_LINK_CREATE)?;
    Ok(owned(fd))
}

/// An attached program with what keeps it alive (its map, its link).
pub struct Attached {
    pub _map: Option<OwnedFd>,
    pub _prog: OwnedFd,
    pub _link: OwnedFd,
}

/// Loads and attaches `XDP_PASS` to `ifindex`.
pub fn attach_pass(ifindex: u32) -> io::Result<Attached> {
    let prog = prog_load(Program::Pass)?;
    let link = xdp_link(&prog, ifindex)?;
    Ok(Attached { _map: None, _prog: prog, _link: link })
}

/// Loads and attaches a redirect from `ifindex` to `to_ifindex` through a devmap, with
/// `loops` turns of the cost loop.
pub fn attach_redirect(ifindex: u32, to_ifindex: u32, loops: u32) -> io::Result<Attached> {
    let map = map_create(BPF_MAP_TYPE_DEVMAP, 1)?;
    map_update(&map, 0, to_ifindex)?;
    let prog = prog_load(Program::Redirect { devmap_fd: map.as_raw_fd(), loops })?;
    let link = xdp_link(&prog, ifindex)?;
    Ok(Attached { _map: Some(map), _prog: prog, _link: link })
}

/// Loads and attaches the AF_XDP redirect to `ifindex` (`loops` turns of the cost loop),
/// `queues` entries in its xskmap;
/// the caller puts each socket in with [`map_update`] on the returned map.
pub fn attach_xsk(ifindex: u32, queues: u32, loops: u32) -> io::Result<(OwnedFd, Attached)> {
    let map = map_create(BPF_MAP_TYPE_XSKMAP, queues)?;
    let prog = prog_load(Program::Xsk { xskmap_fd: map.as_raw_fd(), loops })?;
    let link = xdp_link(&prog, ifindex)?;
    let map2 = map.try_clone()?;
    Ok((map2, Attached { _map: Some(map), _prog: prog, _link: link }))
}

/// A span map: one entry of [`SPAN_VALUE_SIZE`] bytes, all zero.
pub fn span_map_create() -> io::Result<OwnedFd> {
    map_create_sized(BPF_MAP_TYPE_ARRAY, SPAN_VALUE_SIZE, 1)
}

/// What a span map has summed: per task class, ns and count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SpanSums {
    pub ns: [u64; CLASSES],
    pub count: [u64; CLASSES],
}

impl SpanSums {
    /// The sums in a span map's value (u64 words, the machine's byte order).
    pub fn from_value(value: &[u8; SPAN_VALUE_SIZE as usize]) -> Self {
        let word = |off: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&value[off..off + 8]);
            u64::from_ne_bytes(b)
        };
        let mut s = SpanSums::default();
        for class in 0..CLASSES {
            let at = SPAN_SUMS as usize + 16 * class;
            s.ns[class] = word(at);
            s.count[class] = word(at + 8);
        }
        s
    }
}

/// Reads a span map's sums.
pub fn span_read(map: &OwnedFd) -> io::Result<SpanSums> {
    let mut value = [0u8; SPAN_VALUE_SIZE as usize];
    map_lookup(map, 0, &mut value)?;
    Ok(SpanSums::from_value(&value))
}

// perf_event_open(2) (include/uapi/linux/perf_event.h).
const PERF_TYPE_TRACEPOINT: u32 = 2;
/// PERF_ATTR_SIZE_VER0: the first 64 bytes of `struct perf_event_attr` (type, size,
/// config, ...) are all a tracepoint event needs; the kernel zero-fills the rest.
const PERF_ATTR_SIZE_VER0: usize = 64;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
/// `_IO('$', 0)`.
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
/// `_IOW('$', 8, __u32)`.
const PERF_EVENT_IOC_SET_BPF: libc::c_ulong = 0x4004_2408;

/// Attaches the tracepoint program `prog` to the tracepoint with id `tp_id` (its
/// tracefs `id` file) through a perf event on `cpu`, and enables it. The program runs
/// while the returned perf event is open.
pub fn tracepoint_attach(tp_id: u64, cpu: u32, prog: &OwnedFd) -> io::Result<OwnedFd> {
    #[repr(C, align(8))]
    struct PerfEventAttr([u8; PERF_ATTR_SIZE_VER0]);
    let mut attr = PerfEventAttr([0; PERF_ATTR_SIZE_VER0]);
    attr.0[0..4].copy_from_slice(&PERF_TYPE_TRACEPOINT.to_ne_bytes());
    attr.0[4..8].copy_from_slice(&(PERF_ATTR_SIZE_VER0 as u32).to_ne_bytes());
    attr.0[8..16].copy_from_slice(&tp_id.to_ne_bytes());
    // SAFETY: `attr` is a zero-filled perf_event_attr of the size it declares; pid -1
    // with a CPU means every task on that CPU; no group.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr.0.as_ptr(),
            -1 as libc::pid_t,
            cpu as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let event = owned(rc as i32);
    // SAFETY: plain ioctls on the perf event just opened; SET_BPF takes the program's fd
    // by value, ENABLE takes nothing.
    unsafe {
        if libc::ioctl(event.as_raw_fd(), PERF_EVENT_IOC_SET_BPF as _, prog.as_raw_fd()) < 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::ioctl(event.as_raw_fd(), PERF_EVENT_IOC_ENABLE as _, 0) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(event)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The encodings, checked by hand against include/uapi/linux/bpf_common.h and the
    /// instruction-set document: code byte, then src in the high nibble, dst in the low.
    #[test]
    fn instructions_encode_as_the_kernel_reads_them() {
        assert_eq!(Insn::mov64_imm(0, 2).to_bytes(), [0xb7, 0x00, 0, 0, 2, 0, 0, 0]);
        assert_eq!(Insn::ldx_w(2, 1, 16).to_bytes(), [0x61, 0x12, 16, 0, 0, 0, 0, 0]);
        let [a, b] = Insn::ld_map_fd(1, 7);
        assert_eq!(a.to_bytes(), [0x18, 0x11, 0, 0, 7, 0, 0, 0]);
        assert_eq!(b.to_bytes(), [0; 8]);
        assert_eq!(Insn::call(51).to_bytes(), [0x85, 0, 0, 0, 51, 0, 0, 0]);
        assert_eq!(Insn::exit().to_bytes(), [0x95, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(Insn::sub64_imm(4, 1).to_bytes(), [0x17, 0x04, 0, 0, 1, 0, 0, 0]);
        assert_eq!(Insn::jne_imm(4, 0, -2).to_bytes(), [0x55, 0x04, 0xfe, 0xff, 0, 0, 0, 0]);
    }

    #[test]
    fn tracepoint_instructions_encode_as_the_kernel_reads_them() {
        assert_eq!(Insn::mov64_reg(9, 0).to_bytes(), [0xbf, 0x09, 0, 0, 0, 0, 0, 0]);
        assert_eq!(Insn::mov64_reg(2, 10).to_bytes(), [0xbf, 0xa2, 0, 0, 0, 0, 0, 0]);
        assert_eq!(Insn::mov32_reg(0, 0).to_bytes(), [0xbc, 0x00, 0, 0, 0, 0, 0, 0]);
        assert_eq!(Insn::add64_imm(2, -4).to_bytes(), [0x07, 0x02, 0, 0, 0xfc, 0xff, 0xff, 0xff]);
        assert_eq!(Insn::add64_reg(1, 8).to_bytes(), [0x0f, 0x81, 0, 0, 0, 0, 0, 0]);
        assert_eq!(Insn::sub64_reg(8, 1).to_bytes(), [0x1f, 0x18, 0, 0, 0, 0, 0, 0]);
        assert_eq!(Insn::lsh64_imm(2, 4).to_bytes(), [0x67, 0x02, 0, 0, 4, 0, 0, 0]);
        assert_eq!(Insn::jeq_imm(0, 0, 7).to_bytes(), [0x15, 0x00, 7, 0, 0, 0, 0, 0]);
        assert_eq!(Insn::jgt_imm(2, 2, 3).to_bytes(), [0x25, 0x02, 3, 0, 2, 0, 0, 0]);
        assert_eq!(Insn::ldx_dw(1, 0, 16).to_bytes(), [0x79, 0x01, 16, 0, 0, 0, 0, 0]);
        assert_eq!(Insn::stx_dw(9, 8, 7).to_bytes(), [0x7b, 0x79, 8, 0, 0, 0, 0, 0]);
        assert_eq!(Insn::st_w(10, -4, 0).to_bytes(), [0x62, 0x0a, 0xfc, 0xff, 0, 0, 0, 0]);
        assert_eq!(Insn::st_dw(0, 0, 0).to_bytes(), [0x7a, 0x00, 0, 0, 0, 0, 0, 0]);
        assert_eq!(Insn::call(BPF_FUNC_KTIME_GET_NS).to_bytes(), [0x85, 0, 0, 0, 5, 0, 0, 0]);
        assert_eq!(Insn::call(BPF_FUNC_MAP_LOOKUP_ELEM).to_bytes(), [0x85, 0, 0, 0, 1, 0, 0, 0]);
    }

    /// The forward jumps of a span program, each checked to land on the `r0 = 0; exit`
    /// at its end (the jumps of the pid classification skip exactly one instruction).
    fn jumps_to_end(v: &[Insn]) -> usize {
        let end = v.len() - 2;
        assert_eq!(v[end..], [Insn::mov64_imm(0, 0), Insn::exit()]);
        let mut n = 0;
        for (i, insn) in v.iter().enumerate() {
            if matches!(insn.code, 0x15 | 0x25 | 0x55) && insn.off != 1 {
                assert_eq!(i as isize + 1 + insn.off as isize, end as isize, "jump at {i}: {insn:?}");
                n += 1;
            }
        }
        n
    }

    #[test]
    fn span_programs_filter_then_account() {
        let pids = TaskPids::new(Some(22), &[]);
        let entry = Program::SpanEntry { map_fd: 5, cpu: 1, vec: Some(NET_RX_SOFTIRQ), pids }.insns();
        assert_eq!(
            entry[..4],
            [
                Insn::ldx_w(1, 1, SOFTIRQ_VEC_OFFSET),
                Insn::jne_imm(1, 3, entry[1].off),
                Insn::call(BPF_FUNC_GET_SMP_PROCESSOR_ID),
                Insn::jne_imm(0, 1, entry[3].off)
            ]
        );
        assert_eq!(jumps_to_end(&entry), 3, "vec, cpu, null map value");
        assert!(entry.windows(2).any(|w| w == [Insn::jne_imm(0, 22, 1), Insn::mov64_imm(7, CLASS_KSOFTIRQD as i32)]));
        assert!(entry.windows(2).any(|w| w == [Insn::jne_imm(0, 0, 1), Insn::mov64_imm(7, CLASS_IDLE as i32)]));
        assert!(entry.contains(&Insn::stx_dw(9, SPAN_CLASS, 7)));
        assert!(entry.windows(2).any(|w| w == [Insn::call(BPF_FUNC_KTIME_GET_NS), Insn::stx_dw(9, SPAN_START, 0)]));

        // Without a ksoftirqd pid there is no such class; without a vector, no record read.
        let plain = Program::SpanEntry { map_fd: 5, cpu: 0, vec: None, pids: TaskPids::default() }.insns();
        assert_eq!(plain.len(), entry.len() - 4);
        assert_eq!(plain[0], Insn::call(BPF_FUNC_GET_SMP_PROCESSOR_ID));
        assert!(!plain.contains(&Insn::mov64_imm(7, CLASS_KSOFTIRQD as i32)));
        assert_eq!(jumps_to_end(&plain), 2);

        let exit = Program::SpanExit { map_fd: 5, cpu: 1, vec: Some(NET_RX_SOFTIRQ) }.insns();
        assert_eq!(jumps_to_end(&exit), 5, "vec, cpu, null map value, no start, class out of range");
        let bound = exit.iter().find(|i| i.code == 0x25).unwrap();
        assert_eq!((bound.regs, bound.imm), (2, CLASSES as i32 - 1), "the class is checked before it is used");
        // The start is cleared before the sums are touched, and the sums live inside the value.
        let clear = exit.iter().position(|&i| i == Insn::st_dw(0, SPAN_START, 0)).unwrap();
        let add = exit.iter().position(|&i| i == Insn::add64_reg(1, 8)).unwrap();
        assert!(clear < add);
        assert!(SPAN_SUMS + 16 * (CLASSES as i16 - 1) + 16 <= SPAN_VALUE_SIZE as i16);
        assert_eq!(Program::SpanExit { map_fd: 5, cpu: 1, vec: None }.insns().len(), exit.len() - 2);
        for p in [
            Program::SpanEntry { map_fd: 5, cpu: 1, vec: None, pids: TaskPids::default() },
            Program::SpanExit { map_fd: 5, cpu: 1, vec: None },
            Program::Switch { map_fd: 5, cpu: 1, pids: TaskPids::default() },
        ] {
            assert_eq!(p.kind(), (BPF_PROG_TYPE_TRACEPOINT, 0));
            assert!(p.name().to_bytes().len() < 16);
        }
        assert_eq!(Program::Pass.kind(), (BPF_PROG_TYPE_XDP, BPF_XDP));
    }

    /// The moves of a classification chain, pid compared → class, in order.
    fn classes(v: &[Insn], pid: u8) -> Vec<(i32, i32)> {
        v.windows(2)
            .filter(|w| w[0].code == 0x55 && w[0].regs == pid && w[0].off == 1 && w[1].code == 0xb7 && w[1].regs == 7)
            .map(|w| (w[0].imm, w[1].imm))
            .collect()
    }

    #[test]
    fn named_tasks_get_their_own_classes() {
        let pids = TaskPids::new(Some(22), &[300, 301, 4_194_304]);
        assert_eq!(pids.tasks, [Some(300), Some(301), Some(4_194_304), None]);
        let entry = Program::SpanEntry { map_fd: 5, cpu: 1, vec: Some(NET_RX_SOFTIRQ), pids }.insns();
        let expected = vec![
            (0, CLASS_IDLE as i32),
            (22, CLASS_KSOFTIRQD as i32),
            (300, CLASS_TASKS as i32),
            (301, CLASS_TASKS as i32 + 1),
            (4_194_304, CLASS_TASKS as i32 + 2),
        ];
        assert_eq!(classes(&entry, 0), expected);
        // Any other pid keeps the class set before the chain.
        let first = entry.iter().position(|&i| i == Insn::mov64_imm(7, CLASS_OTHER as i32)).unwrap();
        assert_eq!(entry[first + 1], Insn::jne_imm(0, 0, 1));
        assert_eq!(jumps_to_end(&entry), 3);
        assert_eq!(CLASSES, 7);
        assert!(SPAN_SUMS as usize + 16 * CLASSES <= SPAN_VALUE_SIZE as usize);

        let switch = Program::Switch { map_fd: 5, cpu: 1, pids }.insns();
        // The pid switched out is read before the first call overwrites r1, the record.
        assert_eq!(
            switch[..3],
            [
                Insn::ldx_w(6, 1, SWITCH_PREV_PID_OFFSET),
                Insn::call(BPF_FUNC_GET_SMP_PROCESSOR_ID),
                Insn::jne_imm(0, 1, switch[2].off)
            ]
        );
        assert_eq!(classes(&switch, 6), expected);
        assert_eq!(jumps_to_end(&switch), 4, "cpu, null map value, first switch, class out of range");
        // The next start is noted before the check for a first switch; the span is added after it.
        let note = switch.iter().position(|&i| i == Insn::stx_dw(0, SPAN_START, 8)).unwrap();
        assert_eq!(switch[note - 1], Insn::ldx_dw(1, 0, SPAN_START));
        assert_eq!(switch[note + 1], Insn::jeq_imm(1, 0, switch[note + 1].off));
        assert_eq!(switch[note + 2], Insn::sub64_reg(8, 1));
        assert!(note < switch.iter().position(|&i| i == Insn::add64_reg(1, 8)).unwrap());
        let bound = switch.iter().find(|i| i.code == 0x25).unwrap();
        assert_eq!((bound.regs, bound.imm), (7, CLASSES as i32 - 1));
        assert!(switch.contains(&Insn::add64_reg(0, 7)));

        // No ksoftirqd and no tasks: idle or other.
        let bare = Program::Switch { map_fd: 5, cpu: 1, pids: TaskPids::default() }.insns();
        assert_eq!(classes(&bare, 6), [(0, CLASS_IDLE as i32)]);
        assert_eq!(bare.len(), switch.len() - 8);
    }

    #[test]
    fn span_sums_read_the_words_after_start_and_class() {
        let mut value = [0u8; SPAN_VALUE_SIZE as usize];
        for (i, w) in value.chunks_exact_mut(8).enumerate() {
            w.copy_from_slice(&(100 + i as u64).to_ne_bytes());
        }
        assert_eq!(
            SpanSums::from_value(&value),
            SpanSums { ns: [102, 104, 106, 108, 110, 112, 114], count: [103, 105, 107, 109, 111, 113, 115] }
        );
    }

    /// The cost loop jumps back onto its own decrement: pc + 1 + off lands on `r4 -= 1`.
    #[test]
    fn the_cost_loop_jumps_back_to_its_decrement() {
        let v = Program::Redirect { devmap_fd: 3, loops: 500 }.insns();
        assert_eq!(v[..3], [Insn::mov64_imm(4, 500), Insn::sub64_imm(4, 1), Insn::jne_imm(4, 0, -2)]);
        assert_eq!(2 + 1 + v[2].off as isize, 1);
        assert_eq!(Program::Redirect { devmap_fd: 3, loops: 0 }.insns().len(), 6);
        let x = Program::Xsk { xskmap_fd: 4, loops: 7 }.insns();
        assert_eq!(
            x[..4],
            [
                Insn::mov64_imm(4, 7),
                Insn::sub64_imm(4, 1),
                Insn::jne_imm(4, 0, -2),
                Insn::ldx_w(2, 1, XDP_MD_RX_QUEUE_INDEX)
            ]
        );
    }

    #[test]
    fn programs_end_in_exit_with_r0_set() {
        for p in [Program::Pass, Program::Redirect { devmap_fd: 3, loops: 9 }, Program::Xsk { xskmap_fd: 4, loops: 0 }]
        {
            let v = p.insns();
            assert_eq!(*v.last().unwrap(), Insn::exit());
            // r0 comes from the helper call or a move right before the exit.
            let before = v[v.len() - 2];
            assert!(before == Insn::call(BPF_FUNC_REDIRECT_MAP) || before == Insn::mov64_imm(0, XDP_PASS), "{p:?}");
        }
        // The xsk program reads the queue index before r1 is overwritten with the map.
        let x = Program::Xsk { xskmap_fd: 4, loops: 0 }.insns();
        assert_eq!(x[0], Insn::ldx_w(2, 1, XDP_MD_RX_QUEUE_INDEX));
        assert_eq!(x[1].code, 0x18);
        assert_eq!(x[3], Insn::mov64_imm(3, XDP_PASS));
    }
}
