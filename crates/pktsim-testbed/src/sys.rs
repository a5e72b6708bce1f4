//! Thin safe wrappers over the Linux calls pktsim-tb needs.
//!
//! Every fallible call returns `io::Result`; [`SysError`] pairs an error with the call
//! that failed, for the one-line message pktsim-tb prints before exiting with status 1.

use std::ffi::{CStr, CString};
use std::fmt;
use std::io;
use std::mem;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};

/// A failed system call: which call (with its interesting arguments) and the error.
#[derive(Debug)]
pub struct SysError {
    pub call: String,
    pub err: io::Error,
}

impl fmt::Display for SysError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.err.raw_os_error() {
            Some(code) => {
                write!(f, "{}: {}", self.call, strerror(code))?;
                if code == libc::EPERM || code == libc::EACCES {
                    write!(f, " (run as root)")
                } else {
                    write!(f, " (errno {code})")
                }
            }
            None => write!(f, "{}: {}", self.call, self.err),
        }
    }
}

impl SysError {
    /// A failure that is not a system call's (a helper thread that died).
    pub fn other(what: &str) -> Self {
        SysError { call: what.to_string(), err: io::Error::other("failed") }
    }
}

/// Returns a closure for `map_err` that labels an `io::Error` with the call that failed.
pub fn failed(call: impl Into<String>) -> impl FnOnce(io::Error) -> SysError {
    let call = call.into();
    move |err| SysError { call, err }
}

/// The C library's description of an errno value ("Operation not permitted").
fn strerror(code: i32) -> String {
    let mut buf = [0 as libc::c_char; 256];
    // SAFETY: the buffer is valid for its length; the XSI strerror_r NUL-terminates it
    // on success.
    let rc = unsafe { libc::strerror_r(code, buf.as_mut_ptr(), buf.len()) };
    if rc != 0 {
        return format!("error {code}");
    }
    // SAFETY: strerror_r succeeded, so `buf` holds a NUL-terminated string.
    unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned()
}

/// True if `err` is one of the given errno values.
pub fn is_errno(err: &io::Error, codes: &[i32]) -> bool {
    err.raw_os_error().is_some_and(|c| codes.contains(&c))
}

fn cvt(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

// ---------------------------------------------------------------------------------------
// Clocks, sleeping, CPU placement
// ---------------------------------------------------------------------------------------

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid out-pointer. clock_gettime cannot fail for these clocks.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64).wrapping_mul(1_000_000_000).wrapping_add(ts.tv_nsec as u64)
}

/// CLOCK_MONOTONIC in nanoseconds (shared by all network namespaces of the machine).
#[inline]
pub fn mono_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CLOCK_REALTIME in nanoseconds since the Unix epoch.
#[inline]
pub fn real_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// Converts nanoseconds to a `timespec`.
fn timespec_from_ns(ns: u64) -> libc::timespec {
    libc::timespec { tv_sec: (ns / 1_000_000_000) as libc::time_t, tv_nsec: (ns % 1_000_000_000) as libc::c_long }
}

/// Sleeps until CLOCK_MONOTONIC reaches `t_mono_ns`. Returns early with an
/// `Interrupted` error when a signal arrives.
pub fn sleep_until_mono_ns(t_mono_ns: u64) -> io::Result<()> {
    let ts = timespec_from_ns(t_mono_ns);
    // SAFETY: `ts` is a valid timespec; no remaining-time output is requested.
    let rc = unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, ptr::null_mut()) };
    // clock_nanosleep returns the error number instead of setting errno.
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

/// Sets this thread's timer slack, so timed sleeps end closer to the requested time.
pub fn set_timer_slack_ns(slack_ns: u64) -> io::Result<()> {
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer argument.
    cvt(unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, slack_ns as libc::c_ulong, 0, 0, 0) })?;
    Ok(())
}

/// Pins the calling thread (the whole process: pktsim-tb is single-threaded) to one CPU.
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: cpu_set_t is plain data; CPU_SET is bounds-checked above.
    unsafe {
        let mut set: libc::cpu_set_t = mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        cvt(libc::sched_setaffinity(0, mem::size_of::<libc::cpu_set_t>(), &set))?;
    }
    Ok(())
}

/// Runs the calling thread at SCHED_FIFO `priority` (1..=99).
pub fn set_fifo(priority: u32) -> io::Result<()> {
    let param = libc::sched_param { sched_priority: priority as libc::c_int };
    // SAFETY: `param` is a complete sched_param for the call.
    cvt(unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) })?;
    Ok(())
}

/// Runs the calling thread at SCHED_IDLE: it gets a CPU only when nothing else wants it,
/// and any woken thread preempts it at once.
pub fn set_idle_policy() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a complete sched_param for the call.
    cvt(unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) })?;
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Dying with the parent
// ---------------------------------------------------------------------------------------

/// Asks the kernel to SIGKILL this process when its parent dies (PR_SET_PDEATHSIG),
/// then checks that the parent is still `parent`: a parent that died before the
/// request was made would otherwise leave this process running to its end.
pub fn die_with_parent(parent: u32) -> io::Result<()> {
    // SAFETY: PR_SET_PDEATHSIG takes a plain signal number.
    cvt(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) })?;
    // SAFETY: getppid cannot fail.
    let ppid = unsafe { libc::getppid() };
    if u32::try_from(ppid).ok() != Some(parent) {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Stop signals
// ---------------------------------------------------------------------------------------

static STOP_REQUESTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop_signal(_signo: libc::c_int) {
    STOP_REQUESTED.store(true, Ordering::SeqCst);
}

/// Installs SIGINT and SIGTERM handlers that only set the flag read by
/// [`stop_requested`]. They are installed without SA_RESTART, so a blocking sleep or
/// receive returns early with EINTR and the caller sees the flag promptly.
pub fn install_stop_handlers() -> io::Result<()> {
    for signo in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: `sa` is fully initialised (zeroed, then the handler and an empty mask);
        // the handler only touches an atomic, which is async-signal-safe.
        unsafe {
            let mut sa: libc::sigaction = mem::zeroed();
            sa.sa_sigaction = on_stop_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            sa.sa_flags = 0;
            libc::sigemptyset(&mut sa.sa_mask);
            cvt(libc::sigaction(signo, &sa, ptr::null_mut()))?;
        }
    }
    Ok(())
}

/// True once SIGINT or SIGTERM has arrived.
#[inline]
pub fn stop_requested() -> bool {
    STOP_REQUESTED.load(Ordering::Relaxed)
}

// ---------------------------------------------------------------------------------------
// AF_PACKET sockets
// ---------------------------------------------------------------------------------------

/// Opens an AF_PACKET SOCK_RAW socket that receives nothing until bound with a protocol.
pub fn packet_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call; on success we own the new descriptor.
    let fd = cvt(unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: `fd` is a freshly created descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn ifname_cstring(name: &str) -> io::Result<CString> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        return Err(io::Error::from_raw_os_error(libc::ENODEV));
    }
    CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::ENODEV))
}

/// The index of the interface called `name` in the current network namespace.
pub fn if_index(name: &str) -> io::Result<u32> {
    let cname = ifname_cstring(name)?;
    // SAFETY: `cname` is a valid NUL-terminated string.
    let idx = unsafe { libc::if_nametoindex(cname.as_ptr()) };
    if idx == 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(idx)
    }
}

/// The hardware (MAC) address of interface `name`, via SIOCGIFHWADDR on `fd`.
pub fn if_hwaddr(fd: &OwnedFd, name: &str) -> io::Result<[u8; 6]> {
    let cname = ifname_cstring(name)?;
    // SAFETY: `ifr` is zeroed plain data; the name fits (checked by ifname_cstring) and
    // stays NUL-terminated; the kernel fills ifru_hwaddr.
    unsafe {
        let mut ifr: libc::ifreq = mem::zeroed();
        for (dst, src) in ifr.ifr_name.iter_mut().zip(cname.as_bytes()) {
            *dst = *src as libc::c_char;
        }
        cvt(libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFHWADDR, &mut ifr))?;
        let sa = ifr.ifr_ifru.ifru_hwaddr;
        let mut mac = [0u8; 6];
        for (m, b) in mac.iter_mut().zip(sa.sa_data.iter()) {
            *m = *b as u8;
        }
        Ok(mac)
    }
}

/// Binds an AF_PACKET socket to interface `ifindex`. `protocol` is the ethertype to
/// receive (host byte order), or 0 to receive nothing (a send-only socket).
pub fn bind_packet(fd: &OwnedFd, ifindex: u32, protocol: u16) -> io::Result<()> {
    // SAFETY: sockaddr_ll is plain data; we pass its exact size.
    unsafe {
        let mut sll: libc::sockaddr_ll = mem::zeroed();
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = protocol.to_be();
        sll.sll_ifindex = ifindex as libc::c_int;
        cvt(libc::bind(
            fd.as_raw_fd(),
            &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
            mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        ))?;
    }
    Ok(())
}

/// Sets an integer socket option.
pub fn set_sockopt_int(fd: &OwnedFd, level: i32, name: i32, value: i32) -> io::Result<()> {
    let v: libc::c_int = value;
    // SAFETY: we pass a pointer to a c_int and its size.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            &v as *const libc::c_int as *const libc::c_void,
            mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// Reads an integer socket option.
pub fn get_sockopt_int(fd: &OwnedFd, level: i32, name: i32) -> io::Result<i32> {
    let mut v: libc::c_int = 0;
    let mut len = mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: we pass a pointer to a c_int and its size; the kernel writes at most that.
    cvt(unsafe {
        libc::getsockopt(fd.as_raw_fd(), level, name, &mut v as *mut libc::c_int as *mut libc::c_void, &mut len)
    })?;
    Ok(v)
}

/// SO_MEMINFO (include/uapi/asm-generic/socket.h; the same number on x86 and arm).
const SO_MEMINFO: i32 = 55;

/// A socket's memory accounting (SO_MEMINFO): `(rmem_alloc, rcvbuf)` in bytes, the
/// truesize of what sits in its receive queue and the limit it is held to.
pub fn sk_meminfo(fd: &OwnedFd) -> io::Result<(u32, u32)> {
    // SK_MEMINFO_VARS is 9 today; room for more.
    let mut info = [0u32; 16];
    let mut len = mem::size_of_val(&info) as libc::socklen_t;
    // SAFETY: we pass the array and its size; the kernel writes at most `len` bytes.
    cvt(unsafe {
        libc::getsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, SO_MEMINFO, info.as_mut_ptr() as *mut libc::c_void, &mut len)
    })?;
    if (len as usize) < 2 * mem::size_of::<u32>() {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    Ok((info[libc::SK_MEMINFO_RMEM_ALLOC as usize], info[libc::SK_MEMINFO_RCVBUF as usize]))
}

/// Sets SO_RCVTIMEO: a blocking receive returns EAGAIN after `timeout_ns` without data.
pub fn set_recv_timeout_ns(fd: &OwnedFd, timeout_ns: u64) -> io::Result<()> {
    let tv = libc::timeval {
        tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
        tv_usec: ((timeout_ns % 1_000_000_000) / 1_000) as libc::suseconds_t,
    };
    // SAFETY: we pass a pointer to a timeval and its size.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            &tv as *const libc::timeval as *const libc::c_void,
            mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

// ---------------------------------------------------------------------------------------
// UDP sockets
// ---------------------------------------------------------------------------------------

/// Opens an AF_INET SOCK_DGRAM (UDP) socket.
pub fn udp_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call; on success we own the new descriptor.
    let fd = cvt(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: `fd` is a freshly created descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Binds an AF_INET socket to 0.0.0.0:`port`.
pub fn bind_inet_any(fd: &OwnedFd, port: u16) -> io::Result<()> {
    // SAFETY: sockaddr_in is plain data; we pass its exact size.
    unsafe {
        let mut sin: libc::sockaddr_in = mem::zeroed();
        sin.sin_family = libc::AF_INET as libc::sa_family_t;
        sin.sin_port = port.to_be();
        sin.sin_addr = libc::in_addr { s_addr: libc::INADDR_ANY.to_be() };
        cvt(libc::bind(
            fd.as_raw_fd(),
            &sin as *const libc::sockaddr_in as *const libc::sockaddr,
            mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        ))?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Batched send (sendmmsg)
// ---------------------------------------------------------------------------------------

/// A fixed set of equally sized frame buffers sent with one sendmmsg call.
///
/// The socket must be bound to an interface: messages carry no address, so the kernel
/// sends them out of the bound interface.
pub struct TxBatch {
    frame_len: usize,
    buf: Vec<u8>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
}

impl TxBatch {
    /// `n_frames` buffers of `frame_len` bytes each, all zero.
    pub fn new(n_frames: usize, frame_len: usize) -> Self {
        TxBatch {
            frame_len,
            buf: vec![0u8; n_frames * frame_len],
            // SAFETY (zeroed): iovec and mmsghdr are plain C structs; all-zero is valid.
            iovs: (0..n_frames).map(|_| unsafe { mem::zeroed() }).collect(),
            hdrs: (0..n_frames).map(|_| unsafe { mem::zeroed() }).collect(),
        }
    }

    /// Number of frame buffers.
    pub fn len(&self) -> usize {
        self.iovs.len()
    }

    /// Frame buffer `j`.
    #[inline]
    pub fn frame_mut(&mut self, j: usize) -> &mut [u8] {
        &mut self.buf[j * self.frame_len..(j + 1) * self.frame_len]
    }

    /// Sends frames `start..end` with one sendmmsg(MSG_DONTWAIT) call. Returns how many
    /// the kernel accepted (counted from `start`); an error means none was accepted.
    pub fn send(&mut self, fd: &OwnedFd, start: usize, end: usize) -> io::Result<usize> {
        let end = end.min(self.len());
        if start >= end {
            return Ok(0);
        }
        let base = self.buf.as_mut_ptr();
        let iov_base = self.iovs.as_mut_ptr();
        for j in start..end {
            // SAFETY: j < len, so the frame lies inside `buf` and the iovec inside `iovs`.
            let iov = unsafe {
                let iov = iov_base.add(j);
                *iov = libc::iovec {
                    iov_base: base.add(j * self.frame_len) as *mut libc::c_void,
                    iov_len: self.frame_len,
                };
                iov
            };
            let h = &mut self.hdrs[j];
            h.msg_hdr.msg_name = ptr::null_mut();
            h.msg_hdr.msg_namelen = 0;
            h.msg_hdr.msg_iov = iov;
            h.msg_hdr.msg_iovlen = 1;
            h.msg_hdr.msg_control = ptr::null_mut();
            h.msg_hdr.msg_controllen = 0;
            h.msg_hdr.msg_flags = 0;
            h.msg_len = 0;
        }
        // SAFETY: headers start..end point at live iovecs, which point into `buf`; all
        // of them outlive the call.
        let rc = unsafe {
            libc::sendmmsg(
                fd.as_raw_fd(),
                self.hdrs.as_mut_ptr().add(start),
                (end - start) as libc::c_uint,
                libc::MSG_DONTWAIT,
            )
        };
        Ok(cvt(rc)? as usize)
    }
}

// ---------------------------------------------------------------------------------------
// Batched receive (recvmmsg) with kernel receive timestamps
// ---------------------------------------------------------------------------------------

/// Room for each received frame: a full 1514-byte frame and then some.
const RX_FRAME_CAP: usize = 2048;
/// Control buffer per message, in u64 words (aligned for cmsghdr): 64 bytes holds one
/// SCM_TIMESTAMPNS message (CMSG_SPACE(16) = 32) with room to spare.
const RX_CONTROL_WORDS: usize = 8;

/// One received frame as seen through [`RxBatch::packet`].
pub struct RxPacket<'a> {
    /// The frame, starting at the Ethernet header (at most 2048 bytes).
    pub data: &'a [u8],
    /// The frame's length as reported by the kernel.
    pub len: usize,
    /// `sll_pkttype` (PACKET_HOST, PACKET_OUTGOING, ...).
    pub pkttype: u8,
    /// SCM_TIMESTAMPNS: CLOCK_REALTIME when the frame entered this namespace's stack.
    pub kernel_real_ns: Option<u64>,
}

/// Buffers for receiving up to `n` frames with one recvmmsg call.
pub struct RxBatch {
    buf: Vec<u8>,
    control: Vec<[u64; RX_CONTROL_WORDS]>,
    names: Vec<libc::sockaddr_ll>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
    n_received: usize,
}

impl RxBatch {
    /// Buffers for `n_frames` frames per call.
    pub fn new(n_frames: usize) -> Self {
        RxBatch {
            buf: vec![0u8; n_frames * RX_FRAME_CAP],
            control: vec![[0u64; RX_CONTROL_WORDS]; n_frames],
            // SAFETY (zeroed): plain C structs; all-zero is valid.
            names: (0..n_frames).map(|_| unsafe { mem::zeroed() }).collect(),
            iovs: (0..n_frames).map(|_| unsafe { mem::zeroed() }).collect(),
            hdrs: (0..n_frames).map(|_| unsafe { mem::zeroed() }).collect(),
            n_received: 0,
        }
    }

    /// Receives with recvmmsg(MSG_WAITFORONE): waits (up to the socket's SO_RCVTIMEO)
    /// for the first frame, then takes whatever else is queued. Returns the count.
    pub fn recv(&mut self, fd: &OwnedFd) -> io::Result<usize> {
        self.n_received = 0;
        let n = self.hdrs.len();
        let base = self.buf.as_mut_ptr();
        let iov_base = self.iovs.as_mut_ptr();
        let name_base = self.names.as_mut_ptr();
        let control_base = self.control.as_mut_ptr();
        for j in 0..n {
            // SAFETY: j < n, so every pointer stays inside its own buffer.
            let (iov, name, control) = unsafe {
                let iov = iov_base.add(j);
                *iov = libc::iovec { iov_base: base.add(j * RX_FRAME_CAP) as *mut libc::c_void, iov_len: RX_FRAME_CAP };
                (iov, name_base.add(j), control_base.add(j))
            };
            let h = &mut self.hdrs[j];
            h.msg_hdr.msg_name = name as *mut libc::c_void;
            h.msg_hdr.msg_namelen = mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            h.msg_hdr.msg_iov = iov;
            h.msg_hdr.msg_iovlen = 1;
            h.msg_hdr.msg_control = control as *mut libc::c_void;
            h.msg_hdr.msg_controllen = mem::size_of::<[u64; RX_CONTROL_WORDS]>();
            h.msg_hdr.msg_flags = 0;
            h.msg_len = 0;
        }
        // SAFETY: every header points at live name, iovec and control buffers of the
        // sizes given; no timeout pointer (SO_RCVTIMEO bounds the wait).
        let rc = unsafe {
            libc::recvmmsg(
                fd.as_raw_fd(),
                self.hdrs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_WAITFORONE,
                ptr::null_mut(),
            )
        };
        self.n_received = cvt(rc)? as usize;
        Ok(self.n_received)
    }

    /// Frame `j` of the last [`recv`](Self::recv) (`j` < its return value).
    pub fn packet(&self, j: usize) -> RxPacket<'_> {
        let j = j.min(self.n_received.saturating_sub(1));
        let h = &self.hdrs[j];
        let len = h.msg_len as usize;
        let start = j * RX_FRAME_CAP;
        let data = &self.buf[start..start + len.min(RX_FRAME_CAP)];
        RxPacket { data, len, pkttype: self.names[j].sll_pkttype, kernel_real_ns: self.timestamp(j) }
    }

    fn timestamp(&self, j: usize) -> Option<u64> {
        let msg = &self.hdrs[j].msg_hdr;
        // SAFETY: msg_control/msg_controllen describe `control[j]` as filled in by the
        // kernel; the CMSG_* helpers stay inside it, and the payload is read unaligned.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET
                    && (*c).cmsg_type == libc::SCM_TIMESTAMPNS
                    && (*c).cmsg_len >= libc::CMSG_LEN(mem::size_of::<libc::timespec>() as u32) as usize
                {
                    let ts: libc::timespec = ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                    if ts.tv_sec == 0 && ts.tv_nsec == 0 {
                        return None;
                    }
                    return Some((ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64);
                }
                c = libc::CMSG_NXTHDR(msg, c);
            }
        }
        None
    }
}

// ---------------------------------------------------------------------------------------
// Batched receive (recvmmsg) of UDP datagrams
// ---------------------------------------------------------------------------------------

/// Room for each received datagram: any payload of a 1514-byte frame and then some.
const UDP_RX_CAP: usize = 2048;

/// Buffers for receiving up to `n` UDP datagrams (AF_INET, no control messages) with
/// one recvmmsg call.
pub struct UdpRxBatch {
    buf: Vec<u8>,
    names: Vec<libc::sockaddr_in>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
    n_received: usize,
}

impl UdpRxBatch {
    /// Buffers for `n_datagrams` datagrams per call.
    pub fn new(n_datagrams: usize) -> Self {
        UdpRxBatch {
            buf: vec![0u8; n_datagrams * UDP_RX_CAP],
            // SAFETY (zeroed): plain C structs; all-zero is valid.
            names: (0..n_datagrams).map(|_| unsafe { mem::zeroed() }).collect(),
            iovs: (0..n_datagrams).map(|_| unsafe { mem::zeroed() }).collect(),
            hdrs: (0..n_datagrams).map(|_| unsafe { mem::zeroed() }).collect(),
            n_received: 0,
        }
    }

    /// Receives with recvmmsg(MSG_WAITFORONE): waits (up to the socket's SO_RCVTIMEO)
    /// for the first datagram, then takes whatever else is queued. Returns the count.
    pub fn recv(&mut self, fd: &OwnedFd) -> io::Result<usize> {
        self.recv_flags(fd, libc::MSG_WAITFORONE)
    }

    /// Takes whatever is queued without waiting (recvmmsg(MSG_DONTWAIT)); EAGAIN when
    /// nothing is. Returns the count.
    pub fn recv_queued(&mut self, fd: &OwnedFd) -> io::Result<usize> {
        self.recv_flags(fd, libc::MSG_DONTWAIT)
    }

    fn recv_flags(&mut self, fd: &OwnedFd, flags: libc::c_int) -> io::Result<usize> {
        self.n_received = 0;
        let n = self.hdrs.len();
        let base = self.buf.as_mut_ptr();
        let iov_base = self.iovs.as_mut_ptr();
        let name_base = self.names.as_mut_ptr();
        for j in 0..n {
            // SAFETY: j < n, so every pointer stays inside its own buffer.
            let (iov, name) = unsafe {
                let iov = iov_base.add(j);
                *iov = libc::iovec { iov_base: base.add(j * UDP_RX_CAP) as *mut libc::c_void, iov_len: UDP_RX_CAP };
                (iov, name_base.add(j))
            };
            let h = &mut self.hdrs[j];
            h.msg_hdr.msg_name = name as *mut libc::c_void;
            h.msg_hdr.msg_namelen = mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            h.msg_hdr.msg_iov = iov;
            h.msg_hdr.msg_iovlen = 1;
            h.msg_hdr.msg_control = ptr::null_mut();
            h.msg_hdr.msg_controllen = 0;
            h.msg_hdr.msg_flags = 0;
            h.msg_len = 0;
        }
        // SAFETY: every header points at a live name and iovec of the sizes given; no
        // timeout pointer (SO_RCVTIMEO bounds the wait).
        let rc = unsafe {
            libc::recvmmsg(fd.as_raw_fd(), self.hdrs.as_mut_ptr(), n as libc::c_uint, flags, ptr::null_mut())
        };
        self.n_received = cvt(rc)? as usize;
        Ok(self.n_received)
    }

    /// The payload of datagram `j` of the last receive (`j` < its return value); at
    /// most 2048 bytes (a longer datagram is truncated).
    pub fn payload(&self, j: usize) -> &[u8] {
        let j = j.min(self.n_received.saturating_sub(1));
        let len = (self.hdrs[j].msg_len as usize).min(UDP_RX_CAP);
        let start = j * UDP_RX_CAP;
        &self.buf[start..start + len]
    }
}
