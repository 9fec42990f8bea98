"""Device profiles (named presets with their sources) and the cost formulas.

Every formula is simple enough to explain in one lesson cell:

* copy over the host link (pinned memory, one DMA engine per direction, full duplex):
  ``t = latency + bytes / link_bandwidth`` (times ``1 + normal_page_penalty`` for a device
  buffer in normal 4 KB pages);
* copy from pageable host memory: each chunk is first copied by the host into the runtime's
  pinned staging buffer at ``host_stage_bandwidth``, then sent by DMA; per chunk the two stages
  are serial, so the pageable bandwidth is ``1 / (1/host_stage + 1/link)``;
* device-to-device copy and memset: they read and write device memory,
  ``t = latency + bytes / (memory_bandwidth / 2)`` for a copy, ``bytes / memory_bandwidth``
  for a memset.

All times are integer nanoseconds; every division rounds up.

"Engine" here is the hardware's word: a DMA engine, the AI Core's compute units. The
scheduler that orders the simulated work is :class:`acllab.engine.Engine`, a different thing.

Differs from hardware: each device has exactly one H2D, one D2H and one D2D DMA engine, each
running one copy at a time in FIFO order (real SoCs have several DMA channels, and the driver
may split a large copy across them); copies in the same direction from different streams
therefore queue behind each other.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

__all__ = ["DeviceProfile", "PROFILES", "get_profile", "ceil_div", "transfer_ns", "GiB", "MiB",
           "KiB", "HUGE_PAGE", "NORMAL_PAGE"]

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB
HUGE_PAGE = 2 * MiB
NORMAL_PAGE = 4 * KiB


def ceil_div(a: int, b: int) -> int:
    """Integer ceiling of a / b for non-negative a and positive b."""
    return -(-a // b)


def transfer_ns(nbytes: int, bandwidth_bps: int, penalty_permille: int = 0) -> int:
    """Nanoseconds to move ``nbytes`` at ``bandwidth_bps`` bytes/s, plus a per-mille penalty."""
    return ceil_div(nbytes * 1_000_000_000 * (1000 + penalty_permille), bandwidth_bps * 1000)


@dataclass(frozen=True)
class DeviceProfile:
    """One simulated NPU model. Every field is overridable with ``profile.replace(...)``.

    ``cann_release`` names the CANN release the profile follows: where CANN's behaviour
    changed between releases, acllab does what that release does (the table in
    docs/CANN_RELEASES.md lists the differences and their sources). ``acl_version`` is what
    that release's ``aclrtGetVersion`` reports (``acl.get_version()``); ``ai_cores``,
    ``vector_cores`` and ``l2_bytes`` are what ``acl.get_device_capability`` reports.
    """

    name: str
    soc_name: str
    description: str
    device_count: int
    ai_cores: int
    peak_fp16_flops: int          # FLOP/s
    peak_int8_ops: int            # OP/s
    memory_bytes: int
    memory_kind: str              # "DDR" or "HBM" (which get_mem_info attributes apply)
    memory_bandwidth_bps: int     # achievable device-memory bandwidth, bytes/s
    h2d_bandwidth_bps: int        # pinned host -> device over PCIe, bytes/s
    d2h_bandwidth_bps: int        # device -> pinned host over PCIe, bytes/s
    host_stage_bandwidth_bps: int # host memcpy pageable -> pinned staging buffer, bytes/s
    copy_latency_ns: int          # fixed cost of one DMA transfer
    staging_chunk_bytes: int      # size of the runtime's pinned staging buffer
    hugepage_pool_bytes: int      # device memory available as 2 MB huge pages
    normal_page_penalty_permille: int  # DMA slowdown for a device buffer in 4 KB pages
    max_streams: int
    max_events: int
    host_pinned_limit_bytes: int  # how much host memory may be page-locked
    # host-side API costs (ns)
    launch_ns: int                # one asynchronous launch (copy, memset, record ...)
    sync_copy_overhead_ns: int    # submit + wake-up around a synchronous memcpy
    record_host_ns: int
    record_device_ns: int
    wait_wakeup_ns: int           # a stream waking up after the event it waits on
    sync_wakeup_ns: int           # the host waking up after synchronize_*
    callback_ns: int              # host cost of running one callback report
    api_ns: int                   # a cheap bookkeeping call (create, query, get ...)
    malloc_driver_ns: int         # fresh device memory from the driver (first use)
    malloc_driver_ns_per_mib: int
    malloc_pool_ns: int           # a hit in the runtime's caching pool
    pin_ns_per_page: int          # page-locking cost per 4 KB host page
    sources: tuple[str, ...] = ()
    open_device_ns: int = 50_000_000  # first set_device: driver and firmware start-up
    # DVPP media engines (acl.media, acllab.dvpp): units, pixel rates, alignment, memory
    jpegd_units: int = 2                    # JPEG decoder: 1 channel 128 fps, 2+ channels 256
    jpegd_pixels_per_s: int = 265_420_800   # one unit: 1920 x 1080 x 128 fps
    vpc_units: int = 4                      # VPC: n x 360 fps for n < 4 channels, 1440 in all
    vpc_pixels_per_s: int = 746_496_000     # one unit: 1920 x 1080 x 360 fps
    jpege_units: int = 1
    jpege_pixels_per_s: int = 132_710_400   # 1920 x 1080 x 64 fps (uncertain)
    dvpp_task_ns: int = 20_000              # fixed cost of one DVPP task (uncertain)
    jpegd_width_stride_align: int = 128     # JPEGD output width stride (Atlas A2 chips: 64)
    vdec_units: int = 2                     # video decoder: 1 channel 240 fps at 1080p, 2+ 480
    vdec_pixels_per_s: int = 497_664_000    # one unit: 1920 x 1080 x 240 fps
    vdec_channels: int = 32                 # VDEC channel ids 0 to vdec_channels - 1
    venc_units: int = 1                     # video encoder: 1080p 30 fps in all (0: no VENC)
    venc_pixels_per_s: int = 62_208_000     # 1920 x 1080 x 30 fps
    pngd_units: int = 6                     # PNG decoder: 1080p n x 4 fps for n <= 5, 24 in all
    pngd_pixels_per_s: int = 8_294_400      # one unit: 1920 x 1080 x 4 fps (= 3840 x 2160 x 1)
    dvpp_memory_bytes: int = 4 * GiB        # DVPP buffers share a 4 GB window (uncertain)
    # The CANN release this profile follows (see docs/CANN_RELEASES.md), and what that release
    # reports: aclrtGetVersion's (major, minor, patch) and aclGetDeviceCapability's values.
    cann_release: str = "8.0.0"
    acl_version: tuple[int, int, int] = (1, 12, 0)
    vector_cores: int = 0                   # ACL_DEVICE_INFO_VECTOR_CORE_NUM
    l2_bytes: int = 0                       # ACL_DEVICE_INFO_L2_SIZE

    def replace(self, **changes) -> DeviceProfile:
        """A copy with some fields changed, e.g. ``ascend310.replace(h2d_bandwidth_bps=6e9)``."""
        ints = {k: int(v) if isinstance(v, float) else v for k, v in changes.items()}
        return dataclasses.replace(self, **ints)

    @property
    def pageable_bandwidth_bps(self) -> float:
        """Effective pageable host -> device bandwidth of the staging path (large copies)."""
        return 1.0 / (1.0 / self.host_stage_bandwidth_bps + 1.0 / self.h2d_bandwidth_bps)

    def link_bandwidth_bps(self, direction: str) -> int:
        return self.h2d_bandwidth_bps if direction == "h2d" else self.d2h_bandwidth_bps


ASCEND310 = DeviceProfile(
    name="ascend310",
    soc_name="Ascend310",
    description="Atlas 300I inference card (model 3000): four Ascend 310 chips on PCIe 3.0 x16",
    device_count=4,
    ai_cores=2,
    peak_fp16_flops=8_000_000_000_000,
    peak_int8_ops=16_000_000_000_000,
    memory_bytes=8 * GiB,
    memory_kind="DDR",
    memory_bandwidth_bps=51_200_000_000,
    h2d_bandwidth_bps=12_000_000_000,
    d2h_bandwidth_bps=12_000_000_000,
    host_stage_bandwidth_bps=9_800_000_000,
    copy_latency_ns=12_000,
    staging_chunk_bytes=2 * MiB,
    hugepage_pool_bytes=4 * GiB,
    normal_page_penalty_permille=100,
    max_streams=1024,
    max_events=1023,
    host_pinned_limit_bytes=16 * GiB,
    launch_ns=10_000,
    sync_copy_overhead_ns=10_000,
    record_host_ns=2_000,
    record_device_ns=1_000,
    wait_wakeup_ns=3_000,
    sync_wakeup_ns=10_000,
    callback_ns=100_000,
    api_ns=1_000,
    malloc_driver_ns=50_000,
    malloc_driver_ns_per_mib=2_000,
    malloc_pool_ns=1_000,
    pin_ns_per_page=500,
    cann_release="8.0.0",
    acl_version=(1, 12, 0),
    vector_cores=0,
    l2_bytes=8 * MiB,
    sources=(
        "CANN 8.0.0 (commercial), the last line of releases whose AscendCL pages still list "
        "Atlas 200/300/500 inference products (CANN 8.5.0's pages no longer do); AscendCL "
        "1.12.0 (uncertain): the 8.0.0 API reference lists interface versions up to "
        "'V1.12.0 and later' and an acl.h of that generation says 'Current version is "
        "1.12.0'; aclrtGetVersion returns the ACL_*_VERSION macros (hicann/runtime "
        "src/acl/aclrt_impl/acl.cpp, aclrtGetVersionImpl)",
        "aclGetDeviceCapability: AI cores 2, vector cores 0 (the Ascend 310's AI cores do the "
        "vector work; uncertain), L2 8 MiB (Ascend 310 product brief: 8 MB on-chip buffer; "
        "uncertain that the platform file reports exactly this)",
        "Ascend 310: 2 Da Vinci AI cores, 8 TFLOPS fp16 / 16 TOPS int8 (Huawei Ascend 310 "
        "product brief)",
        "Atlas 300I model 3000: 4 x Ascend 310, 32 GB LPDDR4X at 204.8 GB/s in total, so "
        "8 GiB and 51.2 GB/s per chip (Atlas 300I datasheet)",
        "PCIe 3.0 x16 pinned copies about 12 GB/s; pageable/pinned about 0.45 (COST_MODEL.md)",
        "limits 1024 streams and 1023 events per device for 310-class chips (ACL docs)",
        "API costs: launch about 10 us, record 2 us host / 1 us device, wait wake-up 3 us, "
        "synchronize wake-up 10 us, callback 100 us (COST_MODEL.md)",
        "DVPP on Atlas 200/300/500 inference products (CANN 8.0.0 AscendCL docs, performance "
        "specifications): JPEGD 1-channel 1080p 128 fps, 2+ channels 256 fps (2 units); VPC "
        "1080p n x 360 fps for n < 4, 1440 fps for 4+ (4 units); JPEGE: no per-chip figure "
        "found, 1080p 64 fps assumed; a fixed 20 us per DVPP task assumed",
        "JPEGD output: width stride aligned to 128, height stride to 16, size >= "
        "stride_w x stride_h x 3/2 for YUV420SP (pyACL docs, JPEGD restrictions)",
        "VDEC on Atlas 200/300/500 inference products (CANN 8.0.0 AscendCL docs, VDEC "
        "performance specifications: 1080p 480 fps in all, 4K 120, 720p and below 960; the "
        "Atlas 300 DVPP guide: 1080p one channel 240 fps, 2 to 16 channels 480 fps): 2 units "
        "of 1920 x 1080 x 240 px/s; channel ids 0 to 31 (vdec_set_channel_desc_channel_id)",
        "VENC on Atlas 200/300/500 inference products (Atlas 300 DVPP guide, VENC function: "
        "NV12/NV21 in, H.264 BP/MP/HP and H.265 MP out, 128 x 128 to 1920 x 1920, 1080p "
        "30 fps in all channels): 1 unit of 1920 x 1080 x 30 px/s",
        "PNGD on Ascend 310 (pyACL docs, CANN 5.0.4, PNGD performance specifications; the "
        "Atlas 300 DVPP guide's PNGD function): 1080p n x 4 fps for 1 <= n <= 5, 24 fps for 6+ "
        "channels, 4K n x 1 fps, 6 in all: 6 units of 1920 x 1080 x 4 px/s",
    ),
)

ASCEND910B = DeviceProfile(
    name="ascend910b",
    soc_name="Ascend910B2",
    description="Atlas A2 training class: eight Ascend 910B chips (one device each), each on "
                "PCIe 4.0 x16 with 64 GiB HBM",
    device_count=8,
    ai_cores=24,
    peak_fp16_flops=354_000_000_000_000,
    peak_int8_ops=708_000_000_000_000,
    memory_bytes=64 * GiB,
    memory_kind="HBM",
    memory_bandwidth_bps=1_150_000_000_000,
    h2d_bandwidth_bps=23_500_000_000,
    d2h_bandwidth_bps=23_500_000_000,
    host_stage_bandwidth_bps=21_000_000_000,
    copy_latency_ns=10_000,
    staging_chunk_bytes=4 * MiB,
    hugepage_pool_bytes=32 * GiB,
    normal_page_penalty_permille=100,
    max_streams=1984,
    max_events=65536,
    host_pinned_limit_bytes=64 * GiB,
    launch_ns=10_000,
    sync_copy_overhead_ns=10_000,
    record_host_ns=2_000,
    record_device_ns=1_000,
    wait_wakeup_ns=3_000,
    sync_wakeup_ns=10_000,
    callback_ns=100_000,
    api_ns=1_000,
    malloc_driver_ns=50_000,
    malloc_driver_ns_per_mib=1_000,
    malloc_pool_ns=1_000,
    pin_ns_per_page=500,
    jpegd_pixels_per_s=530_841_600,
    jpegd_width_stride_align=64,
    vdec_channels=256,
    venc_units=0,
    cann_release="8.5.0",
    acl_version=(1, 15, 0),
    vector_cores=48,
    l2_bytes=192 * MiB,
    sources=(
        "CANN 8.5.0 (commercial), the release the open-source runtime (hicann/runtime, public "
        "since 2025/12, built against acl-compat 8.5.0) started from; AscendCL 1.15.0 "
        "(uncertain): the first stored versions of hicann/runtime include/external/acl/"
        "acl_rt.h say 'Current version is 1.15.0' (later master commits 1.16.0, 1.17.0)",
        "aclGetDeviceCapability reads the SoCInfo section of the platform file: "
        "Ascend910B2.ini ai_core_cnt=24, vector_core_cnt=48, l2_size=201326592 (192 MiB)",
        "Ascend 910B: 24 cube cores (48 vector), about 354 TFLOPS fp16, 64 GiB HBM at about "
        "1.15 TB/s achievable (COST_MODEL.md)",
        "PCIe 4.0 x16 on a 910B4 card: registered host memory about 23 GB/s H2D, unregistered "
        "about 10 GB/s at 4 MiB (COST_MODEL.md); pageable here 1/(1/21 + 1/23.5) = 11.1 GB/s",
        "910B2 async launch 8.6 to 12.1 us measured (COST_MODEL.md)",
        "limits 1984 streams and 65536 events per device on current Atlas A2 (910B) "
        "(current CANN AscendCL docs for Atlas A2 training products; older docs said 2048 "
        "and 65535)",
        "DVPP on Atlas A2 (CANN 8.5 AscendCL docs, JPEGD performance; table read as the A2 "
        "one, uncertain): 1080p n x 256 fps for n <= 2, 512 fps in all (2 units); JPEGD width "
        "stride aligned to 64 on A2 chips (pyACL docs); VPC and JPEGE figures taken as the "
        "310's (uncertain); PNGD: no published figure for acldvppPng* on A2, the 310's taken "
        "(uncertain)",
        "VDEC on Atlas A2 training products (CANN 8.5.0 AscendCL docs, VDEC performance "
        "specifications, the A2 table: 1080p n x 240 fps for n <= 2, 480 fps in all): 2 units "
        "of 1920 x 1080 x 240 px/s; channel ids 0 to 255 (vdec_set_channel_desc_channel_id)",
        "no VENC: aclvencCreateChannel and aclvencCreateChannelDesc are not supported on Atlas "
        "A2 training products (CANN 8.0.0 and 8.5.0 references)",
    ),
)

PROFILES: dict[str, DeviceProfile] = {p.name: p for p in (ASCEND310, ASCEND910B)}


def get_profile(name_or_profile: str | DeviceProfile) -> DeviceProfile:
    """Look up a profile by name ('ascend310', 'ascend910b') or pass one through."""
    if isinstance(name_or_profile, DeviceProfile):
        return name_or_profile
    try:
        return PROFILES[str(name_or_profile).lower()]
    except KeyError:
        raise ValueError(
            f"unknown device profile {name_or_profile!r}; choose one of {sorted(PROFILES)}"
        ) from None
