// The model zoo: builds any model of models/ from its name (profiles/model_spec.hpp syntax).
//
//   mlp[:layers=4,width=256,input=64,classes=10]      mlp.hpp
//   resnet20 | resnet32 | ... | resnet:depth=N        resnet.hpp (He et al. 2016, CIFAR)
//   resnet:50 | resnet:101 | resnet:152               resnet.hpp (He et al. 2016, ImageNet)
//   vit:test|tiny|small|base|b16|large|l16[,k=v...]   vit.hpp (Dosovitskiy et al. 2021)
//   bert:tiny|mini|small|medium|base|large[,k=v...]   bert.hpp (Devlin et al. 2019)
//   gpt2:tiny|small|124m|medium|355m|large|774m|xl|1.5b[,k=v...]   gpt2.hpp (Radford et al. 2019)
//   unet[:B=5,C=64,image=192,norm=batch|group]        unet.hpp (torchgpipe's U-Net(B, C))
//   uniform:layers=L,fwd_ms=f,...                     synthetic.hpp (profiles/synthetic.hpp's twin)
//   torchscript:FILE.pt[,input_shape=D1/D2,...]       torchscript.hpp (a user's saved module)
//
// One description: every family but `uniform` and `torchscript` is parsed by
// profiles/zoo/configs.hpp (one config, one preset table, shared with the analytic zoo) and built
// layer for layer as the analytic descriptor (zoo::describe_*) lists it, so both zoos accept the
// same names and agree on layer names, kinds, parameters and skip edges.
//
// Weights are created, never downloaded (a TorchScript model's are the file's: torchscript.hpp).
// build_model(name, dtype, seed) is deterministic: every parameter is drawn from a local
// at::Generator seeded with `seed`, in build order, so the same arguments give bit-identical
// parameters. The global LibTorch generator is neither read nor reseeded, so concurrent builds on
// different threads are safe and independent. float32 and float64 are supported (the executor's
// gradient-equality tests run in float64).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/layered_model.hpp"

namespace pipetwin::models {

// Throws InputError for an unknown family, preset or option, or a dtype other than float32 and
// float64.
LayeredModel build_model(const std::string& name, torch::Dtype dtype = torch::kFloat32,
                         uint64_t seed = 0);

// The parameter count of the model build_model(name) would build, from its description
// (allocates nothing, so it works for paper-size models).
int64_t parameter_count(const std::string& name);

// ModelSpec::to_string of the parsed name: presets first, then options sorted by key.
std::string canonical_model_name(const std::string& name);

// Names that build: the presets of every family, test sizes and paper sizes.
std::vector<std::string> model_presets();

}  // namespace pipetwin::models
