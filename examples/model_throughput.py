"""A real pyACL program: load an offline model and time back-to-back executions with events.

    acllab atc --model zoo:resnet50 --framework 5 --output resnet50_b32 \\
               --input_shape "data:32,3,224,224" --soc_version Ascend310
    acllab profile examples/model_throughput.py resnet50_b32.om 32

prints images per second. For a dynamic-batch model, pass the batch to run as the second
argument; the hidden ascend_mbatch_shape_data input is set up as AscendCL requires.
"""

import sys

import acl

ACL_MEM_MALLOC_HUGE_FIRST = 0


def check(ret, what):
    if ret != 0:
        raise RuntimeError(f"{what} failed with {ret}: {acl.get_recent_err_msg()}")


def dataset(parts):
    ds = acl.mdl.create_dataset()
    for ptr, size in parts:
        _, ret = acl.mdl.add_dataset_buffer(ds, acl.create_data_buffer(ptr, size))
        check(ret, "add_dataset_buffer")
    return ds


def main(path, batch, runs=20):
    check(acl.init(), "init")
    check(acl.rt.set_device(0), "set_device")
    model_id, ret = acl.mdl.load_from_file(path)
    check(ret, "load_from_file")
    desc = acl.mdl.create_desc()
    check(acl.mdl.get_desc(desc, model_id), "get_desc")

    buffers = []
    for i in range(acl.mdl.get_num_inputs(desc)):
        size = acl.mdl.get_input_size_by_index(desc, i)
        ptr, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
        check(ret, "malloc")
        check(acl.rt.memset(ptr, size, 0, size), "memset")
        buffers.append((ptr, size))
    inputs = dataset(buffers)
    out_size = acl.mdl.get_output_size_by_index(desc, 0)
    out_ptr, ret = acl.rt.malloc(out_size, ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "malloc")
    outputs = dataset([(out_ptr, out_size)])

    gears, ret = acl.mdl.get_dynamic_batch(desc)
    if gears["batchCount"]:
        index, ret = acl.mdl.get_input_index_by_name(desc, "ascend_mbatch_shape_data")
        check(ret, "get_input_index_by_name")
        check(acl.mdl.set_dynamic_batch_size(model_id, inputs, index, batch), "set batch")

    stream, ret = acl.rt.create_stream()
    check(ret, "create_stream")
    start, _ = acl.rt.create_event()
    end, _ = acl.rt.create_event()
    check(acl.rt.record_event(start, stream), "record_event")
    for _ in range(runs):
        check(acl.mdl.execute_async(model_id, inputs, outputs, stream), "execute_async")
    check(acl.rt.record_event(end, stream), "record_event")
    check(acl.rt.synchronize_event(end), "synchronize_event")
    ms, ret = acl.rt.event_elapsed_time(start, end)
    check(ret, "event_elapsed_time")
    print(f"{runs} executions of batch {batch}: {ms:.3f} ms, "
          f"{runs * batch / (ms / 1000):.0f} images/s")

    for ev in (start, end):
        acl.rt.destroy_event(ev)
    check(acl.rt.destroy_stream(stream), "destroy_stream")
    for ds in (inputs, outputs):
        for i in range(acl.mdl.get_dataset_num_buffers(ds)):
            acl.destroy_data_buffer(acl.mdl.get_dataset_buffer(ds, i))
        acl.mdl.destroy_dataset(ds)
    for ptr, _ in [*buffers, (out_ptr, out_size)]:
        check(acl.rt.free(ptr), "free")
    acl.mdl.destroy_desc(desc)
    check(acl.mdl.unload(model_id), "unload")
    check(acl.rt.reset_device(0), "reset_device")
    check(acl.finalize(), "finalize")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 32)
