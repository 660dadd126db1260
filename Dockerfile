# syntax=docker/dockerfile:1
# Two images, built from the repository root:
#   docker build --target server      -t anisoscope/server:latest .
#   docker build --target worker-cuda -t anisoscope/worker-cuda:latest .

# The worker's base must ship a LibTorch built with the C++11 ABI, like the apt gRPC and
# Abseil it links against: NVIDIA's PyTorch images do; pip/conda wheels before 2.7 do not.
# From 24.10 on they are Ubuntu 24.04, whose gRPC/protobuf/Abseil match Debian 12's.
ARG WORKER_BASE=nvcr.io/nvidia/pytorch:25.01-py3

# server-build: Debian 12, installed and built by scripts/setup.sh exactly as CI does.
FROM debian:12 AS server-build
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
WORKDIR /src
COPY . .
# Lists the packages owning the libraries the binaries load, for the runtime stage.
RUN ./scripts/setup.sh \
 && ldd build/bin/anisoscope-server build/bin/anisoscope-worker build/bin/anisoscope \
    | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u \
    | while read -r lib; do \
        dpkg -S "$lib" 2>/dev/null || dpkg -S "$(readlink -f "$lib")" 2>/dev/null \
          || dpkg -S "/usr$lib" 2>/dev/null || { echo "no package owns $lib" >&2; exit 1; }; \
      done \
    | awk -F': ' '{print $1}' | tr -s ', ' '\n' | sort -u > /runtime-packages \
 && echo libopenblas0-openmp >> /runtime-packages

# server: slim runtime with the server, its embedded workers' binary (beside it, where the
# server looks), the CLI and the dashboard (bin/../web is the server's default --web-dir); no
# compilers, no test tools.
FROM debian:12-slim AS server
COPY --from=server-build /runtime-packages /tmp/runtime-packages
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive xargs -a /tmp/runtime-packages \
      apt-get install -y --no-install-recommends \
 && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages \
 && groupadd --system --gid 10001 anisoscope \
 && useradd --system --uid 10001 --gid anisoscope --home-dir /var/lib/anisoscope \
      --create-home anisoscope
COPY --from=server-build /src/build/bin/anisoscope-server /src/build/bin/anisoscope-worker \
     /src/build/bin/anisoscope /opt/anisoscope/bin/
COPY --from=server-build /src/build/web /opt/anisoscope/web
ENV PATH=/opt/anisoscope/bin:$PATH
USER anisoscope
WORKDIR /var/lib/anisoscope
EXPOSE 50051 8080
ENTRYPOINT ["anisoscope-server"]

# worker-cuda: the engine and the worker only, against the image's CUDA LibTorch; it stays
# on the PyTorch image, whose CUDA and LibTorch libraries the worker loads at run time.
# libcurl and pugixml: the worker fetches remote steps (Hub, S3) itself (docs/sources.md).
FROM ${WORKER_BASE} AS worker-cuda
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config \
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
      libabsl-dev libspdlog-dev nlohmann-json3-dev libicu-dev libcli11-dev \
      libxxhash-dev libonig-dev libssl-dev libblas-dev \
      libcurl4-openssl-dev libpugixml-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DANISOSCOPE_WORKER_ONLY=ON -DANISOSCOPE_BUILD_TESTS=OFF \
      -DCMAKE_PREFIX_PATH="$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')" \
 && cmake --build /tmp/build --target anisoscope-worker \
 && install -m 755 /tmp/build/bin/anisoscope-worker /usr/local/bin/ \
 && rm -rf /tmp/build /src \
 && groupadd --system --gid 10001 anisoscope \
 && useradd --system --uid 10001 --gid anisoscope --no-create-home anisoscope
WORKDIR /
USER anisoscope
ENTRYPOINT ["anisoscope-worker"]
