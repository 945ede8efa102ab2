# Builds tollgate on Debian 12 with the same setup script a developer uses.
FROM debian:bookworm AS build
WORKDIR /src
COPY . .
RUN ./scripts/setup.sh \
 && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release \
 && cmake --build build -j"$(nproc)" --target tollgate

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends librdkafka1 librocksdb7.8 libssl3 libcurl4 libyaml-cpp0.7 libjemalloc2 bubblewrap \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/build/cli/tollgate /usr/local/bin/tollgate
# The shipped default policy (`up` without --policy); mount your own over it
# or pass --policy. It is recorded in the log, so it must hold no secrets.
COPY config/default-policy.yaml /etc/tollgate/default-policy.yaml
ENV TOLLGATE_DEFAULT_POLICY=/etc/tollgate/default-policy.yaml
VOLUME /var/lib/tollgate
ENTRYPOINT []
CMD ["tollgate", "up", "--data", "/var/lib/tollgate"]
