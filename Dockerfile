# The image Ray nodes run for real fleets: vLLM's OpenAI server image with loadtest on top.
# Pinned to a release tag so every node of a cluster serves the same vLLM.
FROM vllm/vllm-openai:v0.33.0

ENV PYTHONUNBUFFERED=1 \
    RAY_USAGE_STATS_ENABLED=0

WORKDIR /opt/loadtest
COPY pyproject.toml README.md ./
COPY loadtest ./loadtest
COPY scenarios ./scenarios
COPY cluster ./cluster
COPY analysis ./analysis
COPY contract ./contract
COPY common ./common
# The vllm extra is already satisfied by the base image; installing it keeps the pin checked.
RUN python3 -m pip install --no-cache-dir ".[vllm]"

RUN useradd --create-home --uid 1000 loadtest && mkdir -p /results && chown loadtest /results
USER loadtest
WORKDIR /results

ENTRYPOINT ["loadtest"]
CMD ["--help"]
