"""The benchmarks' REGISTER_BROKER frames are what a stock 5.5.0 broker sends, byte for byte."""

from pathlib import Path

from benchmarks import broker_frames as frames
from service.remoting.codec import decode_frame

CAPTURED = Path(__file__).parents[1] / "fixtures" / "register_frame_5_5_0.bin"


def test_stock_frame_rebuilds_a_real_5_5_0_brokers_registration():
    """tests/fixtures/register_frame_5_5_0.bin: a stock broker's first registration (capture_register_frame.py)."""
    captured = CAPTURED.read_bytes()
    body = frames.stock_body(frames.stock_topics("DefaultCluster", "broker-a"), 0, 1795852656706, 1795852669656)
    assert frames.stock_frame("DefaultCluster", "broker-a", "127.0.0.1:29732", body, 30, acting_master=True) \
        == captured
    cmd = decode_frame(captured)
    assert cmd.version == frames.VERSION_5_5_0 and int(cmd.ext_fields["bodyCrc32"]) == frames.crc32_of(cmd.body)


def test_a_stock_table_holds_the_system_topics_and_the_brokers_own():
    table = frames.stock_topics("C", "b", {"T": 4})
    assert len(table) == 16 and table["T"] == (4, 6) and table["rmq_sys_SYNC_BROKER_MEMBER_b"] == (1, 1)
    assert table["C"] == (16, 7) and table["TBW102"] == (8, 7)
