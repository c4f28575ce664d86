"""Host-made tensor maps: the field reader on hand-made words (CPU), the table builder, and the
reader against the driver's own encoder (`gpu`: cuTensorMapEncodeTiled needs libcuda)."""

import pytest
import torch

from nvgg.kernels import tensormaps


def _words(address, dims, strides, box):
    w = [0] * 16
    w[0] = address
    sizes = [d - 1 for d in dims] + [0] * (4 - len(dims))
    w[4], w[5] = sizes[0] | sizes[1] << 32, sizes[2] | sizes[3] << 32
    s = [x // 16 for x in strides] + [0] * (3 - len(strides))
    w[1] = 0x46592 | s[0] << 32
    w[2], w[3] = s[1], s[2]
    b = [x - 1 for x in box] + [0] * (4 - len(box))
    w[6], w[7] = b[0] << 56, b[1] | b[2] << 8 | b[3] << 16
    return [tensormaps.signed64(x) for x in w]


def test_fields_read_back_what_was_written():
    words = _words(0x7F00_1234_5600, (256, 112, 32), (512, 57344), (256, 4, 1))
    f = tensormaps.fields(words, 3)
    assert f == tensormaps.MapFields(0x7F00_1234_5600, (256, 112, 32), (512, 57344), (256, 4, 1))
    assert tensormaps.fields(words, 2).dims == (256, 112)
    with pytest.raises(ValueError, match="16 words"):
        tensormaps.fields(words[:8], 2)


def test_signed64_round_trips_through_int64():
    for x in (0, 1, 2 ** 63 - 1, 2 ** 63, 2 ** 64 - 1):
        assert tensormaps.signed64(x) & (2 ** 64 - 1) == x
        torch.tensor([tensormaps.signed64(x)], dtype=torch.int64)  # fits


def test_build_table_times_each_group_and_keeps_the_rows():
    def encode(g, row):
        row[:, 0] = g + 1
    table = tensormaps.build_table(3, 5, encode, "cpu")
    assert tuple(table.table.shape) == (3, 5, 16) and table.table[:, :, 0].tolist() == [[1] * 5, [2] * 5, [3] * 5]
    assert len(table.encode_us) == 3 and all(t >= 0 for t in table.encode_us) and table.per_group_us >= 0


@pytest.mark.gpu
@pytest.mark.parametrize("dtype, elem, cols, box_cols", [("UINT8", 1, 3584, 128), ("FLOAT16", 2, 4096, 64)])
def test_fields_match_the_drivers_encoding(dtype, elem, cols, box_cols):
    """The field positions `fields` reads are the driver's: encode with cuTensorMapEncodeTiled,
    read back the address, sizes, row stride and box."""
    buf = torch.empty(176 * cols * elem, dtype=torch.uint8, device="cuda")
    words = tensormaps.encode_tiled_2d(dtype, buf.data_ptr(), 176, cols, elem, box_cols, 32)
    f = tensormaps.fields(words, 2)
    assert f == tensormaps.MapFields(buf.data_ptr(), (cols, 176), (cols * elem,), (box_cols, 32))


def test_launch_config_struct_has_the_drivers_layout():
    """launch._LaunchConfig is passed to cuLaunchKernelEx by pointer: its layout must be cuda.h's
    CUlaunchConfig on a 64-bit machine (seven unsigned ints, the stream, the attribute pointer,
    their count)."""
    import ctypes

    from nvgg.kernels.launch import _LaunchConfig
    offsets = {name: getattr(_LaunchConfig, name).offset for name, _ in _LaunchConfig._fields_}
    assert offsets == {"gridDimX": 0, "gridDimY": 4, "gridDimZ": 8, "blockDimX": 12, "blockDimY": 16, "blockDimZ": 20,
                       "sharedMemBytes": 24, "hStream": 32, "attrs": 40, "numAttrs": 48}
    assert ctypes.sizeof(_LaunchConfig) == 56


def test_launch_attribute_struct_has_the_drivers_layout():
    """launch._LaunchAttribute: cuda.h's CUlaunchAttribute (the id, padding to 8 bytes, a 64-byte
    value union whose int flag, or cluster shape x, y, z, comes first), with the ids of cuda.h's
    cluster-dimension and programmatic-serialization attributes."""
    import ctypes

    from nvgg.kernels import launch

    attrs, count = launch._attributes(True, (2, 1, 1))
    assert count == 2 and ctypes.sizeof(launch._LaunchAttribute) == 72 and launch._LaunchAttribute.value.offset == 8
    cluster, programmatic = bytes(attrs[0]), bytes(attrs[1])
    assert cluster[:20] == bytes([4, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0]) and not any(cluster[20:])
    assert programmatic[:12] == bytes([6, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0]) and not any(programmatic[12:])
    assert launch._attributes(False, (1, 1, 1))[1] == 0 and launch._attributes(True, (1, 1, 1))[0][0].id == 6


def test_setup_phases_report_the_encoding_in_all_and_a_groups_median():
    # the first group of a process pays the driver's first call: the median keeps it out
    assert tensormaps.setup_phases([1200.0, 30.0, 32.0]) == {"encode_maps": 1262.0, "encode_maps_per_group": 32.0}
