# Builds tollgate on Debian 12 with the same setup script a developer uses.
FROM debian:bookworm AS build
WORKDIR /src
COPY . .
RUN ./scripts/setup.sh \
 && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release \
 && cmake --build build -j"$(nproc)" --target tollgate

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends librdkafka1 librocksdb7.8 libssl3 libcurl4 libyaml-cpp0.7 libjemalloc2 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/build/cli/tollgate /usr/local/bin/tollgate
VOLUME /var/lib/tollgate
ENTRYPOINT []
CMD ["tollgate", "up", "--data", "/var/lib/tollgate"]
