"""The architectures of the real-model workloads, written with torch.nn so that their parameter
tensors have the published shapes, counts and order (torchvision and transformers are not usable
here). Only the shapes matter to the network; the forward passes exist so `aggnet profile` can
time the layers on this machine.

- ResNet-50 v1.5 (stride in the 3x3 convolution, ImageNet head): 25,557,032 parameters;
- VGG-16 (no batch norm, ImageNet head): 138,357,544;
- BERT-base (uncased vocabulary, with the pooler): 109,482,240;
- GPT-2 small (language-model head tied to the token embedding): 124,439,808;
- NCF, NeuMF as NVIDIA DeepLearningExamples trains it on MovieLens-20m (138,493 users, 26,744 items,
  64 factors, MLP 256-256-128-64): 31,832,577, almost all embeddings, whose gradient DDP sends
  dense (nn.Embedding's default): the recommendation model of SwitchML's and ATP's evaluations;
- LSTM, the BIG LSTM language model on the One Billion Word benchmark (Jozefowicz et al. 2016, as
  NVIDIA's f-lm trains it: 793,470 words, 1024-dim embeddings, two LSTM layers of 8192 cells
  projected to 1024, softmax over the vocabulary): 1,776,946,046. Trained with a sampled softmax
  (8192 words a step), so its compute is that of an 8192-word softmax (`timing`), while DDP sends
  every embedding and softmax row's gradient.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (carrying the stride), 1x1 expand by 4, plus the shortcut."""

    def __init__(self, cin: int, width: int, stride: int):
        super().__init__()
        cout = width * 4
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.downsample = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                           if stride != 1 or cin != cout else None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + (x if self.downsample is None else self.downsample(x)))


class ResNet50(nn.Module):
    def __init__(self, classes: int = 1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        stages, cin = [], 64
        for blocks, width, stride in ((3, 64, 1), (4, 128, 2), (6, 256, 2), (3, 512, 2)):
            stage = []
            for i in range(blocks):
                stage.append(Bottleneck(cin, width, stride if i == 0 else 1))
                cin = width * 4
            stages.append(nn.Sequential(*stage))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.fc = nn.Linear(2048, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 3, 2, 1)
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class VGG16(nn.Module):
    PLAN = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")

    def __init__(self, classes: int = 1000):
        super().__init__()
        layers: list[nn.Module] = []
        cin = 3
        for v in self.PLAN:
            if v == "M":
                layers.append(nn.MaxPool2d(2))
            else:
                layers += [nn.Conv2d(cin, int(v), 3, padding=1), nn.ReLU(inplace=True)]
                cin = int(v)
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Linear(512 * 7 * 7, 4096), nn.ReLU(inplace=True), nn.Dropout(),
                                        nn.Linear(4096, 4096), nn.ReLU(inplace=True), nn.Dropout(),
                                        nn.Linear(4096, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.adaptive_avg_pool2d(self.features(x), 7)
        return self.classifier(torch.flatten(x, 1))


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, heads: int, causal: bool) -> torch.Tensor:
    """Multi-head scaled dot-product attention over (batch, sequence, hidden) tensors."""
    b, s, h = q.shape

    def split(t: torch.Tensor) -> torch.Tensor:
        return t.view(b, s, heads, h // heads).transpose(1, 2)

    out = F.scaled_dot_product_attention(split(q), split(k), split(v), is_causal=causal)
    return out.transpose(1, 2).reshape(b, s, h)


class BertLayer(nn.Module):
    def __init__(self, hidden: int, heads: int, ffn: int):
        super().__init__()
        self.heads = heads
        self.query, self.key, self.value = (nn.Linear(hidden, hidden) for _ in range(3))
        self.attention_output = nn.Linear(hidden, hidden)
        self.attention_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.intermediate = nn.Linear(hidden, ffn)
        self.output = nn.Linear(ffn, hidden)
        self.output_norm = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = _attention(self.query(x), self.key(x), self.value(x), self.heads, causal=False)
        x = self.attention_norm(x + self.attention_output(a))
        return self.output_norm(x + self.output(F.gelu(self.intermediate(x))))


class BertBase(nn.Module):
    def __init__(self, vocab: int = 30522, hidden: int = 768, layers: int = 12, heads: int = 12,
                 ffn: int = 3072, positions: int = 512, types: int = 2):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, hidden)
        self.position_embeddings = nn.Embedding(positions, hidden)
        self.token_type_embeddings = nn.Embedding(types, hidden)
        self.embedding_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.layers = nn.ModuleList(BertLayer(hidden, heads, ffn) for _ in range(layers))
        self.pooler = nn.Linear(hidden, hidden)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.word_embeddings(tokens) + self.position_embeddings(positions) + \
            self.token_type_embeddings(torch.zeros_like(tokens))
        x = self.embedding_norm(x)
        for layer in self.layers:
            x = layer(x)
        return torch.tanh(self.pooler(x[:, 0]))


class GPT2Block(nn.Module):
    def __init__(self, hidden: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(hidden)
        self.c_attn = nn.Linear(hidden, 3 * hidden)
        self.attn_proj = nn.Linear(hidden, hidden)
        self.ln_2 = nn.LayerNorm(hidden)
        self.c_fc = nn.Linear(hidden, 4 * hidden)
        self.mlp_proj = nn.Linear(4 * hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.c_attn(self.ln_1(x)).chunk(3, dim=-1)
        x = x + self.attn_proj(_attention(q, k, v, self.heads, causal=True))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT2Small(nn.Module):
    def __init__(self, vocab: int = 50257, hidden: int = 768, layers: int = 12, heads: int = 12,
                 positions: int = 1024):
        super().__init__()
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(positions, hidden)
        self.blocks = nn.ModuleList(GPT2Block(hidden, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.t()  # the head shares the embedding's weights


class NCF(nn.Module):
    """NeuMF: a matrix-factorization branch (user x item embeddings) beside an MLP over both."""

    def __init__(self, users: int = 138493, items: int = 26744, factors: int = 64,
                 mlp: tuple[int, ...] = (256, 256, 128, 64)):
        super().__init__()
        self.mf_user_embed = nn.Embedding(users, factors)
        self.mf_item_embed = nn.Embedding(items, factors)
        self.mlp_user_embed = nn.Embedding(users, mlp[0] // 2)
        self.mlp_item_embed = nn.Embedding(items, mlp[0] // 2)
        self.mlp = nn.ModuleList(nn.Linear(a, b) for a, b in zip(mlp, mlp[1:]))
        self.final = nn.Linear(mlp[-1] + factors, 1)

    def forward(self, pairs: torch.Tensor) -> torch.Tensor:
        user, item = pairs[:, 0], pairs[:, 1]
        x = torch.cat((self.mlp_user_embed(user), self.mlp_item_embed(item)), dim=1)
        for layer in self.mlp:
            x = F.relu(layer(x))
        return self.final(torch.cat((self.mf_user_embed(user) * self.mf_item_embed(item), x), dim=1))


class BigLSTM(nn.Module):
    """Embedding, LSTM layers with a projection (LSTMP), and a softmax layer over the vocabulary."""

    def __init__(self, vocab: int = 793470, embedding: int = 1024, cells: int = 8192, projection: int = 1024,
                 layers: int = 2):
        super().__init__()
        self.embedding = nn.Embedding(vocab, embedding)
        self.lstm = nn.ModuleList(nn.LSTM(embedding if i == 0 else projection, cells, proj_size=projection,
                                          batch_first=True) for i in range(layers))
        self.softmax = nn.Linear(projection, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embedding(tokens)
        for layer in self.lstm:
            x, _ = layer(x)
        return self.softmax(x)


@dataclass(frozen=True)
class ModelSpec:
    """A workload model: how to build it and a batch of input for timing it (`aggnet profile`);
    `timing` builds the model whose layers are timed when it computes less than the full one
    (same layer names: a sampled softmax)."""

    build: Callable[[], nn.Module]
    example: Callable[[int], torch.Tensor]
    input_text: str  # what one sample is, for the profile file
    timing: Callable[[], nn.Module] | None = None


def _images(batch: int) -> torch.Tensor:
    return torch.randn(batch, 3, 224, 224)


def _tokens(vocab: int, length: int = 128) -> Callable[[int], torch.Tensor]:
    return lambda batch: torch.randint(0, vocab, (batch, length))


def _pairs(batch: int) -> torch.Tensor:
    return torch.stack((torch.randint(0, 138493, (batch,)), torch.randint(0, 26744, (batch,))), dim=1)


LSTM_SAMPLED = 8192  # words in the BIG LSTM's sampled softmax


MODELS: dict[str, ModelSpec] = {
    "resnet50": ModelSpec(ResNet50, _images, "a 3x224x224 image"),
    "vgg16": ModelSpec(VGG16, _images, "a 3x224x224 image"),
    "bert-base": ModelSpec(BertBase, _tokens(30522), "a sequence of 128 tokens"),
    "gpt2": ModelSpec(GPT2Small, _tokens(50257), "a sequence of 128 tokens"),
    "ncf": ModelSpec(NCF, _pairs, "a (user, item) pair"),
    "lstm": ModelSpec(BigLSTM, _tokens(LSTM_SAMPLED, 20), "a sequence of 20 words (BPTT length), softmax over "
                      f"{LSTM_SAMPLED} words as the sampled softmax", lambda: BigLSTM(vocab=LSTM_SAMPLED)),
}


class UnknownModel(ValueError):
    exit_code = 2


def spec(name: str) -> ModelSpec:
    """The model called `name`; UnknownModel naming the choices otherwise."""
    if name not in MODELS:
        raise UnknownModel(f"model {name!r} is not one of {', '.join(MODELS)}")
    return MODELS[name]


def build(name: str, device: str = "meta") -> nn.Module:
    """Model `name` with its real parameter shapes; on the meta device no memory is allocated."""
    with torch.device(device):
        return spec(name).build()


def layers(model: nn.Module) -> dict[str, list[int]]:
    """Module name -> indices (in model.parameters() order) of the parameters it owns itself."""
    index = {id(p): i for i, p in enumerate(model.parameters())}
    out: dict[str, list[int]] = {}
    for name, module in model.named_modules():
        own = [index[id(p)] for p in module.parameters(recurse=False) if id(p) in index]
        if own:
            out[name] = own
    return out
