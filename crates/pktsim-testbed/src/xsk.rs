//! AF_XDP sockets (`net/xdp/xsk.c`, `include/uapi/linux/if_xdp.h`) without libxdp: a
//! umem, the four rings mapped into this process, and the socket bound to one queue of
//! an interface in copy mode.
//!
//! A ring is a power-of-two array shared with the kernel with a producer and a consumer
//! index: the side that produces writes its entries, then publishes the producer index
//! (release); the side that consumes reads the producer index (acquire), reads the
//! entries, then publishes its consumer index (release).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};

const AF_XDP: i32 = 44;
const SOL_XDP: i32 = 283;
const XDP_MMAP_OFFSETS: i32 = 1;
const XDP_RX_RING: i32 = 2;
const XDP_TX_RING: i32 = 3;
const XDP_UMEM_REG: i32 = 4;
const XDP_UMEM_FILL_RING: i32 = 5;
const XDP_UMEM_COMPLETION_RING: i32 = 6;
const XDP_STATISTICS: i32 = 7;
const XDP_PGOFF_RX_RING: i64 = 0;
const XDP_PGOFF_TX_RING: i64 = 0x8000_0000;
const XDP_UMEM_PGOFF_FILL_RING: i64 = 0x1_0000_0000;
const XDP_UMEM_PGOFF_COMPLETION_RING: i64 = 0x1_8000_0000;
/// sockaddr_xdp flags.
const XDP_COPY: u16 = 1 << 1;
const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;
/// Ring flag: the kernel wants a system call to go on (need_wakeup).
const XDP_RING_NEED_WAKEUP: u32 = 1;
// Busy polling (include/uapi/asm-generic/socket.h).
const SO_BUSY_POLL: i32 = 46;
const SO_PREFER_BUSY_POLL: i32 = 69;
const SO_BUSY_POLL_BUDGET: i32 = 70;

/// Size of one umem frame (a page half: the kernel's copy mode needs the frame, headroom
/// and skb_shared_info to fit).
pub const FRAME_SIZE: u32 = 2048;

/// `struct xdp_desc`: a frame on the rx or tx ring.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct XdpDesc {
    pub addr: u64,
    pub len: u32,
    pub options: u32,
}

/// `struct xdp_ring_offset` (with `flags`, Linux 5.4 and later).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct RingOffset {
    producer: u64,
    consumer: u64,
    desc: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct MmapOffsets {
    rx: RingOffset,
    tx: RingOffset,
    fr: RingOffset,
    cr: RingOffset,
}

/// `struct xdp_statistics`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct XdpStatistics {
    pub rx_dropped: u64,
    pub rx_invalid_descs: u64,
    pub tx_invalid_descs: u64,
    pub rx_ring_full: u64,
    pub rx_fill_ring_empty_descs: u64,
    pub tx_ring_empty_descs: u64,
}

/// An mmap'ed area, unmapped on drop.
struct Mapping {
    addr: *mut libc::c_void,
    len: usize,
}

impl Mapping {
    fn new(fd: Option<i32>, len: usize, offset: i64) -> io::Result<Self> {
        let (flags, fd) = match fd {
            Some(fd) => (libc::MAP_SHARED | libc::MAP_POPULATE, fd),
            None => (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE, -1),
        };
        // SAFETY: a fresh mapping of `len` bytes; the kernel picks the address.
        let addr = unsafe { libc::mmap(ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, flags, fd, offset) };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping { addr, len })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `addr`/`len` are exactly what mmap returned; nothing refers to it after.
        unsafe { libc::munmap(self.addr, self.len) };
    }
}

/// One ring of `size` entries of `T` (u64 for fill and completion, XdpDesc for rx, tx).
pub struct Ring<T> {
    _map: Mapping,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    desc: *mut T,
    mask: u32,
    size: u32,
}

impl<T: Copy> Ring<T> {
    fn map(fd: i32, off: &RingOffset, size: u32, pgoff: i64) -> io::Result<Self> {
        let len = off.desc as usize + size as usize * std::mem::size_of::<T>();
        let map = Mapping::new(Some(fd), len, pgoff)?;
        let base = map.addr as *mut u8;
        // SAFETY: the offsets come from XDP_MMAP_OFFSETS and lie within the mapping.
        unsafe {
            Ok(Ring {
                producer: base.add(off.producer as usize) as *const AtomicU32,
                consumer: base.add(off.consumer as usize) as *const AtomicU32,
                flags: base.add(off.flags as usize) as *const AtomicU32,
                desc: base.add(off.desc as usize) as *mut T,
                mask: size - 1,
                size,
                _map: map,
            })
        }
    }

    fn prod(&self) -> &AtomicU32 {
        // SAFETY: points into the live mapping, to an aligned u32 the kernel shares.
        unsafe { &*self.producer }
    }
    fn cons(&self) -> &AtomicU32 {
        // SAFETY: as `prod`.
        unsafe { &*self.consumer }
    }

    /// Whether the kernel asks for a system call (XDP_RING_NEED_WAKEUP).
    pub fn needs_wakeup(&self) -> bool {
        // SAFETY: as `prod`.
        unsafe { &*self.flags }.load(Ordering::Relaxed) & XDP_RING_NEED_WAKEUP != 0
    }

    // ---- consumer side (rx, completion)

    /// Entries ready to consume, at most `max`; returns (first index, count).
    pub fn peek(&self, max: u32) -> (u32, u32) {
        let cons = self.cons().load(Ordering::Relaxed);
        let prod = self.prod().load(Ordering::Acquire);
        (cons, prod.wrapping_sub(cons).min(max))
    }

    pub fn read(&self, idx: u32) -> T {
        // SAFETY: idx & mask < size; the entry was published by the producer index.
        unsafe { ptr::read_volatile(self.desc.add((idx & self.mask) as usize)) }
    }

    /// Gives `n` consumed entries back.
    pub fn release(&self, n: u32) {
        let cons = self.cons().load(Ordering::Relaxed);
        self.cons().store(cons.wrapping_add(n), Ordering::Release);
    }

    // ---- producer side (fill, tx)

    /// Free entries, at most `max`; returns (first index, count).
    pub fn reserve(&self, max: u32) -> (u32, u32) {
        let prod = self.prod().load(Ordering::Relaxed);
        let cons = self.cons().load(Ordering::Acquire);
        (prod, (self.size - prod.wrapping_sub(cons)).min(max))
    }

    pub fn write(&self, idx: u32, v: T) {
        // SAFETY: idx & mask < size, an entry this side owns until it is submitted.
        unsafe { ptr::write_volatile(self.desc.add((idx & self.mask) as usize), v) }
    }

    /// Publishes `n` written entries.
    pub fn submit(&self, n: u32) {
        let prod = self.prod().load(Ordering::Relaxed);
        self.prod().store(prod.wrapping_add(n), Ordering::Release);
    }
}

/// An AF_XDP socket with its own umem of `frames` frames.
pub struct Xsk {
    pub fd: OwnedFd,
    umem: Mapping,
    pub fill: Ring<u64>,
    pub comp: Ring<u64>,
    pub rx: Option<Ring<XdpDesc>>,
    pub tx: Option<Ring<XdpDesc>>,
    pub frames: u32,
}

fn setsockopt<T>(fd: i32, level: i32, name: i32, v: &T) -> io::Result<()> {
    // SAFETY: `v` is a live value of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            v as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Which rings a socket has, and their sizes.
pub struct XskConfig {
    pub frames: u32,
    /// Entries of the rx and tx rings, and of the completion ring.
    pub ring: u32,
    /// Entries of the fill ring.
    pub fill: u32,
    pub rx: bool,
    pub tx: bool,
}

impl Xsk {
    /// A socket on `ifindex`, `queue`, copy mode with need_wakeup, rings of `c.ring`.
    pub fn new(ifindex: u32, queue: u32, c: &XskConfig) -> io::Result<Xsk> {
        // SAFETY: plain socket(2).
        let raw = unsafe { libc::socket(AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let umem = Mapping::new(None, (c.frames * FRAME_SIZE) as usize, 0)?;
        // struct xdp_umem_reg: addr, len, chunk_size, headroom, flags, tx_metadata_len.
        #[repr(C)]
        struct UmemReg {
            addr: u64,
            len: u64,
            chunk_size: u32,
            headroom: u32,
            flags: u32,
            tx_metadata_len: u32,
        }
        let reg = UmemReg {
            addr: umem.addr as u64,
            len: umem.len as u64,
            chunk_size: FRAME_SIZE,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        setsockopt(raw, SOL_XDP, XDP_UMEM_REG, &reg)?;
        setsockopt(raw, SOL_XDP, XDP_UMEM_FILL_RING, &c.fill)?;
        setsockopt(raw, SOL_XDP, XDP_UMEM_COMPLETION_RING, &c.ring)?;
        if c.rx {
            setsockopt(raw, SOL_XDP, XDP_RX_RING, &c.ring)?;
        }
        if c.tx {
            setsockopt(raw, SOL_XDP, XDP_TX_RING, &c.ring)?;
        }
        let mut off = MmapOffsets::default();
        let mut len = std::mem::size_of::<MmapOffsets>() as libc::socklen_t;
        // SAFETY: `off` is writable for `len` bytes.
        if unsafe {
            libc::getsockopt(raw, SOL_XDP, XDP_MMAP_OFFSETS, &mut off as *mut _ as *mut libc::c_void, &mut len)
        } < 0
        {
            return Err(io::Error::last_os_error());
        }
        let fill = Ring::map(raw, &off.fr, c.fill, XDP_UMEM_PGOFF_FILL_RING)?;
        let comp = Ring::map(raw, &off.cr, c.ring, XDP_UMEM_PGOFF_COMPLETION_RING)?;
        let rx = if c.rx { Some(Ring::map(raw, &off.rx, c.ring, XDP_PGOFF_RX_RING)?) } else { None };
        let tx = if c.tx { Some(Ring::map(raw, &off.tx, c.ring, XDP_PGOFF_TX_RING)?) } else { None };
        // struct sockaddr_xdp: family, flags, ifindex, queue_id, shared_umem_fd.
        #[repr(C)]
        struct SockaddrXdp {
            family: u16,
            flags: u16,
            ifindex: u32,
            queue_id: u32,
            shared_umem_fd: u32,
        }
        let sa = SockaddrXdp {
            family: AF_XDP as u16,
            flags: XDP_COPY | XDP_USE_NEED_WAKEUP,
            ifindex,
            queue_id: queue,
            shared_umem_fd: 0,
        };
        // SAFETY: `sa` is a complete sockaddr_xdp of the size passed.
        if unsafe {
            libc::bind(
                raw,
                &sa as *const _ as *const libc::sockaddr,
                std::mem::size_of::<SockaddrXdp>() as libc::socklen_t,
            )
        } < 0
        {
            return Err(io::Error::last_os_error());
        }
        Ok(Xsk { fd, umem, fill, comp, rx, tx, frames: c.frames })
    }

    /// The bytes of umem frame `addr` (`len` of them).
    pub fn frame(&self, addr: u64, len: u32) -> &[u8] {
        let end = (addr as usize + len as usize).min(self.umem.len);
        let start = (addr as usize).min(end);
        // SAFETY: within the umem mapping, which lives as long as self.
        unsafe { std::slice::from_raw_parts((self.umem.addr as *const u8).add(start), end - start) }
    }

    /// Umem frame `addr` to write into (a whole frame).
    pub fn frame_mut(&mut self, addr: u64) -> &mut [u8] {
        let start = (addr as usize).min(self.umem.len);
        let len = (FRAME_SIZE as usize).min(self.umem.len - start);
        // SAFETY: within the umem mapping; the frame is this side's (not on a kernel ring).
        unsafe { std::slice::from_raw_parts_mut((self.umem.addr as *mut u8).add(start), len) }
    }

    /// Busy polling on this socket: SO_PREFER_BUSY_POLL, SO_BUSY_POLL `usecs` and a NAPI
    /// budget of `budget` frames per poll.
    pub fn busy_poll(&self, usecs: i32, budget: i32) -> io::Result<()> {
        let fd = self.fd.as_raw_fd();
        setsockopt(fd, libc::SOL_SOCKET, SO_PREFER_BUSY_POLL, &1i32)?;
        setsockopt(fd, libc::SOL_SOCKET, SO_BUSY_POLL, &usecs)?;
        setsockopt(fd, libc::SOL_SOCKET, SO_BUSY_POLL_BUDGET, &budget)
    }

    /// The NAPI the socket's frames came from (SO_INCOMING_NAPI_ID; 0: none known, and
    /// busy polling has nothing to run).
    pub fn napi_id(&self) -> u32 {
        let mut id = 0u32;
        let mut len = std::mem::size_of::<u32>() as libc::socklen_t;
        // SAFETY: `id` is writable for `len` bytes.
        let rc = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                56,
                &mut id as *mut u32 as *mut libc::c_void,
                &mut len,
            )
        };
        if rc < 0 {
            0
        } else {
            id
        }
    }

    pub fn statistics(&self) -> io::Result<XdpStatistics> {
        let mut st = XdpStatistics::default();
        let mut len = std::mem::size_of::<XdpStatistics>() as libc::socklen_t;
        // SAFETY: `st` is writable for `len` bytes.
        if unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                SOL_XDP,
                XDP_STATISTICS,
                &mut st as *mut _ as *mut libc::c_void,
                &mut len,
            )
        } < 0
        {
            return Err(io::Error::last_os_error());
        }
        Ok(st)
    }

    /// recvfrom(MSG_DONTWAIT) of nothing: with busy polling it runs the queue's NAPI.
    pub fn kick_rx(&self) {
        // SAFETY: a zero-length receive into no buffer.
        unsafe {
            libc::recvfrom(
                self.fd.as_raw_fd(),
                ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                ptr::null_mut(),
                ptr::null_mut(),
            )
        };
    }

    /// sendto(MSG_DONTWAIT) of nothing: copy mode transmits the tx ring's frames (at most
    /// 32 per call, TX_BATCH_SIZE); returns whether the kernel said it has more to do.
    pub fn kick_tx(&self) -> bool {
        // SAFETY: a zero-length send of no buffer.
        let rc = unsafe { libc::sendto(self.fd.as_raw_fd(), ptr::null(), 0, libc::MSG_DONTWAIT, ptr::null(), 0) };
        rc < 0 && matches!(io::Error::last_os_error().raw_os_error(), Some(libc::EAGAIN) | Some(libc::EBUSY))
    }

    /// Blocks in poll(2) until the rx ring has frames or `timeout_ms` passes.
    pub fn wait_rx(&self, timeout_ms: i32) {
        let mut p = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut p, 1, timeout_ms) };
    }
}
