"""PyTorch peers of tbd's models: the same network, optimizer, hyperparameters, inputs and loss
as each tbd model, in one module per model, for the side-by-side (tools/tbd_track peer runs
them in alternation with tbd_bench; scripts/torch_side_by_side.py runs them on a GPU).

MODULES maps tbd's model name (the first component of `<Model>/train/batch:<N>`) to its peer
module; each module documents its deviations from tbd in its header and has MODEL, PARAMS
(tbd's parameter count, which its full configuration must equal) and setup() (peers/common.py
says what setup returns). Importing this package imports no torch: the modules are loaded on
first use, so the registry and the name grammar work where torch is absent.
"""
import importlib

MODULES = {
    "ResNet50": "resnet50",
    "InceptionV3": "inception_v3",
    "Transformer": "transformer",
    "Seq2Seq": "seq2seq",
    "DeepSpeech2": "deepspeech2",
    "WGAN": "wgan",
    "A3C": "a3c",
    "FasterRCNN": "faster_rcnn",
    "GPT2": "gpt2",
    "Llama": "llama",
}


def module(model):
    """The peer module of tbd model `model` ("ResNet50"); KeyError names the models there are."""
    if model not in MODULES:
        raise KeyError(f"no PyTorch peer for the model '{model}' (peers exist for "
                       f"{', '.join(MODULES)})")
    return importlib.import_module(f"{__name__}.{MODULES[model]}")
