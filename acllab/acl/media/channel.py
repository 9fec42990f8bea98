"""``acl.media`` channels: channel descriptions and the channels made on them."""

from __future__ import annotations

from ...dvpp.tasks import dvpp_device
from ...errors import Fail
from .._api import rt
from ._desc import ChannelDesc, _destroy, _get, _new, api

__all__ = ["dvpp_create_channel_desc", "dvpp_destroy_channel_desc", "dvpp_create_channel",
           "dvpp_destroy_channel"]


@api("acldvppCreateChannelDesc", bare=True, outs=(0,))
def dvpp_create_channel_desc():
    """A channel description (then dvpp_create_channel makes the channel)."""
    return _new(ChannelDesc())


@api("acldvppCreateChannel")
def dvpp_create_channel(channel_desc):
    """Create the image-processing channel on the current device."""
    desc = _get(channel_desc, ChannelDesc, "channel_desc")
    if desc.channel:
        raise Fail(100000, f"channel_desc 0x{desc.handle:x} already has a channel")
    r = rt()
    dev = r.current_context().device
    r.spend(r.profile.api_ns)
    dvpp_device(r, dev)
    desc.channel, desc.device = True, dev.id


@api("acldvppDestroyChannel")
def dvpp_destroy_channel(channel_desc):
    """Destroy the channel (tasks already submitted still run)."""
    desc = _get(channel_desc, ChannelDesc, "channel_desc")
    if not desc.channel:
        raise Fail(100000, f"channel_desc 0x{desc.handle:x} has no channel to destroy")
    r = rt()
    r.spend(r.profile.api_ns)
    desc.channel = False


@api("acldvppDestroyChannelDesc")
def dvpp_destroy_channel_desc(channel_desc):
    _destroy(channel_desc, ChannelDesc, "channel_desc")


def _channel(channel_desc) -> ChannelDesc:
    desc = _get(channel_desc, ChannelDesc, "channel_desc")
    if not desc.channel:
        raise Fail(100000, f"channel_desc 0x{desc.handle:x} has no channel: call "
                           "acl.media.dvpp_create_channel(channel_desc) first")
    return desc
