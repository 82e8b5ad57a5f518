# syntax=docker/dockerfile:1
# Multi-stage: the first stage checks the types with the dev dependencies; the runtime stage has production
# dependencies only and runs as the unprivileged `node` user. TypeScript runs through tsx (a production
# dependency), so the image starts with the same `npm start` command the tests run.

FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json biome.json vitest.config.ts ./
COPY src ./src
COPY sim ./sim
COPY test ./test
RUN npx tsc --noEmit -p .

FROM node:20-bookworm-slim AS runtime
ENV NODE_ENV=production \
    PORT=3000 \
    POLICY_FILE=/etc/cloudops/policy.yml
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/src ./src
# The simulator and the Slack stand-in ship for the compose "sim" profile and `npm run demo`.
COPY --from=build /app/sim ./sim
COPY bin ./bin
COPY policy.example.yml /etc/cloudops/policy.yml
USER node
EXPOSE 3000
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
  CMD node -e "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
# The same command as `npm start`, without npm in between, so SIGTERM reaches the bot directly.
CMD ["node", "--import", "tsx", "src/main.ts"]
