//! XDP programs for the testbed, assembled here and loaded with the `bpf(2)` system call:
//! no compiler, no object file, nothing installed besides pktsim-tb.
//!
//! Three programs, each a handful of instructions:
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

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

// bpf(2) commands (include/uapi/linux/bpf.h, enum bpf_cmd).
const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;

// enum bpf_map_type, enum bpf_prog_type, enum bpf_attach_type.
pub const BPF_MAP_TYPE_DEVMAP: u32 = 14;
pub const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
/// XDP_FLAGS_DRV_MODE (include/uapi/linux/if_link.h): native XDP, in the driver.
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// XDP actions (enum xdp_action).
pub const XDP_PASS: i32 = 2;

/// bpf_redirect_map (enum bpf_func_id).
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
/// `struct xdp_md` field offset of `rx_queue_index` (data, data_end, data_meta,
/// ingress_ifindex, rx_queue_index: five u32).
const XDP_MD_RX_QUEUE_INDEX: i16 = 16;
/// `src_reg` of a 64-bit immediate load that names a map by file descriptor.
const BPF_PSEUDO_MAP_FD: u8 = 1;

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
    /// `dst -= imm` (BPF_ALU64 | BPF_SUB | BPF_K).
    pub const fn sub64_imm(dst: u8, imm: i32) -> Self {
        Self::new(0x17, dst, 0, 0, imm)
    }
    /// `if dst != imm goto pc + 1 + off` (BPF_JMP | BPF_JNE | BPF_K).
    pub const fn jne_imm(dst: u8, imm: i32, off: i16) -> Self {
        Self::new(0x55, dst, 0, off, imm)
    }
    /// `dst = *(u32 *)(src + off)` (BPF_LDX | BPF_MEM | BPF_W).
    pub const fn ldx_w(dst: u8, src: u8, off: i16) -> Self {
        Self::new(0x61, dst, src, off, 0)
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

/// The testbed's XDP programs.
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
        }
    }

    /// The name the program carries in the kernel (`bpftool prog` shows it).
    pub fn name(self) -> &'static CStr {
        match self {
            Program::Pass => c"pktsim_pass",
            Program::Redirect { .. } => c"pktsim_redirect",
            Program::Xsk { .. } => c"pktsim_xsk",
        }
    }
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
    let fd = Attr::new().u32(0, map_type).u32(4, 4).u32(8, 4).u32(12, entries).call(BPF_MAP_CREATE)?;
    Ok(owned(fd))
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

/// Loads `prog` as an XDP program (GPL: bpf_redirect_map is GPL-only). A rejected program
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
    let mut attr = Attr::new();
    attr.u32(0, BPF_PROG_TYPE_XDP)
        .u32(4, (insns.len() / 8) as u32)
        .u64(8, insns.as_ptr() as u64)
        .u64(16, license.as_ptr() as u64)
        .bytes(48, &name)
        .u32(68, BPF_XDP);
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
