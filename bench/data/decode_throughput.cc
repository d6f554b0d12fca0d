// hptrain-decode-bench: JPEG decode + augmentation throughput of the imagefolder source, the way
// training reads it: the next batch prefetched into the decode pool while this batch is read,
// randomly resized-cropped to 224, flipped and normalized into a float batch.
//
//   hptrain-decode-bench --write DIR [--images 2000]     256x256 RGB JPEGs in DIR/{train,test}/cK/
//   hptrain-decode-bench --read DIR [--threads W] [--batch 64] [--epochs 2]
//
// --read prints one line: samples, seconds, CPU seconds (all threads), samples/s and samples per
// CPU second of the last epoch (the first warms the page cache and the threads). bench/data/decode_throughput.sh runs it against PIL + torchvision
// in a PyTorch DataLoader on the same images and the same cores.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <sys/resource.h>
#include <sys/stat.h>

#include "absl/strings/str_cat.h"
#include "runtime/base/exit_codes.h"
#include "runtime/cli/flags.h"
#include "runtime/train/data/augment.h"
#include "runtime/train/data/decode_pool.h"
#include "runtime/train/data/image_decode.h"
#include "runtime/train/data/sample_source.h"

namespace {

constexpr char kProgram[] = "hptrain-decode-bench";
constexpr int kSide = 256;
constexpr int kClasses = 10;

absl::Status MakeDirs(const std::string& path) {
  for (size_t slash = 1; slash != std::string::npos; slash = path.find('/', slash + 1)) {
    mkdir(path.substr(0, slash).c_str(), 0755);
  }
  if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::InternalError(absl::StrCat(path, ": cannot create"));
  }
  return absl::OkStatus();
}

// Smooth color fields with noise: JPEG sizes like photographs' (about 15-25 KB at quality 90).
absl::Status Write(const std::string& dir, int images) {
  std::mt19937 gen(1);
  std::uniform_int_distribution<int> noise(-12, 12);
  std::vector<uint8_t> pixels(kSide * kSide * 3);
  for (int i = 0; i < images + images / 10; ++i) {
    const bool test = i >= images;
    const int cls = i % kClasses;
    const std::string folder = absl::StrCat(dir, test ? "/test/c" : "/train/c", cls);
    if (absl::Status s = MakeDirs(folder); !s.ok()) return s;
    const double fx = 0.02 + 0.01 * (i % 7), fy = 0.015 + 0.01 * (i % 5);
    for (int y = 0; y < kSide; ++y)
      for (int x = 0; x < kSide; ++x)
        for (int c = 0; c < 3; ++c) {
          const double v = 128 + 90 * std::sin(fx * x * (c + 1) + fy * y + i) + noise(gen);
          pixels[(y * kSide + x) * 3 + c] = static_cast<uint8_t>(std::clamp(v, 0.0, 255.0));
        }
    auto jpeg = hptrain::train::EncodeJpeg(pixels.data(), kSide, kSide, 3, 90);
    if (!jpeg.ok()) return jpeg.status();
    const std::string path = absl::StrCat(folder, "/", i, ".jpg");
    FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) return absl::InternalError(absl::StrCat(path, ": cannot write"));
    std::fwrite(jpeg->data(), 1, jpeg->size(), f);
    std::fclose(f);
  }
  return absl::OkStatus();
}

// CPU seconds of this process (every thread), user + system.
double CpuSeconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

absl::Status Read(const std::string& dir, int threads, int batch, int epochs) {
  using namespace hptrain::train;
  SetDefaultDecodeThreads(threads);
  hptrain::job::DatasetSpec spec;
  spec.name = "bench";
  spec.format = "imagefolder";
  spec.path = dir;
  spec.augment.random_resized_crop.size = 224;
  spec.augment.horizontal_flip = true;
  auto source = OpenImageFolderSource(spec, Split::kTrain);
  if (!source.ok()) return source.status();
  const SampleShape in = (*source)->shape();
  const SampleShape out = AugmentedShape(spec.augment, in);
  const float mean[3] = {0.485f, 0.456f, 0.406f}, stdev[3] = {0.229f, 0.224f, 0.225f};
  std::vector<float> pixels(static_cast<size_t>(in.numel()));
  std::vector<float> inputs(static_cast<size_t>(batch * out.numel()));
  std::vector<int64_t> targets(static_cast<size_t>(batch));
  const int64_t n = (*source)->size();
  double seconds = 0, cpu = 0;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937_64(epoch));
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = CpuSeconds();
    auto slice = [&](int64_t b) {
      return std::vector<int64_t>(order.begin() + std::min(n, b * batch),
                                  order.begin() + std::min(n, (b + 1) * batch));
    };
    (*source)->Prefetch(slice(0));
    for (int64_t b = 0; b * batch < n; ++b) {
      (*source)->Prefetch(slice(b + 1));
      const std::vector<int64_t> indices = slice(b);
      for (size_t k = 0; k < indices.size(); ++k) {
        const int64_t i = indices[k];
        if (absl::Status s = (*source)->ReadPixels(i, pixels.data()); !s.ok()) return s;
        if (absl::Status s = (*source)->ReadTarget(i, &targets[k], nullptr); !s.ok()) return s;
        float* dst = inputs.data() + k * out.numel();
        ApplyAugment(spec.augment, DrawAugment(spec.augment, in, 42, epoch, i), in, pixels.data(),
                     dst);
        const int64_t plane = out.height * out.width;
        for (int64_t c = 0; c < out.channels; ++c) {
          for (int64_t p = 0; p < plane; ++p) {
            dst[c * plane + p] = (dst[c * plane + p] - mean[c]) / stdev[c];
          }
        }
      }
    }
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    cpu = CpuSeconds() - cpu_start;
  }
  std::printf(
      "hptrain threads=%d samples=%lld seconds=%.3f cpu_seconds=%.3f samples_per_s=%.1f "
      "samples_per_cpu_s=%.1f\n",
      threads, static_cast<long long>(n), seconds, cpu, static_cast<double>(n) / seconds,
      static_cast<double>(n) / cpu);
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  std::string write_dir, read_dir;
  int images = 2000, threads = 1, batch = 64, epochs = 2;
  auto flags = hptrain::cli::FlagSet::ForProgram(
      kProgram, "--write DIR [--images N] | --read DIR [--threads W] [--batch B] [--epochs E]");
  flags.String("write", &write_dir, "", "write N 256x256 JPEGs (and N/10 test images) into DIR");
  flags.Int("images", &images, "", "training images to write (2000)");
  flags.String("read", &read_dir, "", "read DIR as an imagefolder data set");
  flags.Int("threads", &threads, "", "decode pool threads (1)");
  flags.Int("batch", &batch, "", "samples per batch (64)");
  flags.Int("epochs", &epochs, "", "epochs; the last is timed (2)");
  if (int code = 0; !flags.ParseOrExit(argc, argv, &code)) return code;
  if (write_dir.empty() == read_dir.empty() || images < 1 || threads < 1 || batch < 1 ||
      epochs < 1) {
    return hptrain::ReportErrorAs(
        kProgram, absl::InvalidArgumentError("give one of --write and --read; counts >= 1"));
  }
  absl::Status s = write_dir.empty() ? Read(read_dir, threads, batch, epochs)
                                     : Write(write_dir, images);
  return s.ok() ? 0 : hptrain::ReportErrorAs(kProgram, s);
}
