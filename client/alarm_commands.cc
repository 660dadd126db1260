#include "client/alarm_commands.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "client/formatters.h"
#include "client/query_support.h"
#include "common/proto_json.h"

namespace anisoscope::client {
namespace {

std::string LayerText(const v1::Alarm& alarm) {
  return alarm.layer() < 0 ? "all" : absl::StrCat(alarm.layer());
}

std::string AlarmsTable(const v1::ListAlarmsResponse& response) {
  std::vector<std::vector<std::string>> rows;
  for (const v1::Alarm& alarm : response.alarms()) {
    const bool firing = alarm.state() == v1::ALARM_STATE_FIRING;
    rows.push_back({absl::StrCat(alarm.id()), firing ? "firing" : "resolved", alarm.severity(),
                    alarm.run(), absl::StrCat(alarm.step()),
                    firing ? "-" : absl::StrCat(alarm.resolved_step()), alarm.rule(),
                    LayerText(alarm), ShortNumber(alarm.value()), alarm.summary()});
  }
  return RenderTable(
      {"ID", "STATE", "SEVERITY", "RUN", "STEP", "RESOLVED", "RULE", "LAYER", "VALUE", "SUMMARY"},
      rows, {true, false, false, false, true, true, false, true, true, false});
}

// The HTTP API's JSON for each alarm (the protobuf JSON mapping), one per line.
std::string AlarmsJson(const v1::ListAlarmsResponse& response) {
  std::vector<std::string> objects;
  for (const v1::Alarm& alarm : response.alarms()) {
    objects.push_back(ProtoToJson(alarm).value_or("null"));
  }
  return JsonList(objects);
}

int RunAlarms(const ParsedArgs& args, const CommandContext& context) {
  v1::ListAlarmsRequest request;
  request.set_run(args.GetString("run"));
  const std::string state = args.GetString("state", "");
  if (state == "firing") request.set_state(v1::ALARM_STATE_FIRING);
  if (state == "resolved") request.set_state(v1::ALARM_STATE_RESOLVED);
  request.set_since_revision(args.GetInt("since-revision", 0));
  request.set_limit(static_cast<int32_t>(args.GetInt("limit", 0)));
  v1::ListAlarmsResponse response;
  if (int code =
          CallQueryService(context, &v1::QueryService::Stub::ListAlarms, request, &response)) {
    return code;
  }
  if (args.GetString("format", "table") == "json") {
    context.out() << AlarmsJson(response);
  } else {
    context.out() << AlarmsTable(response);
    if (response.more()) {
      context.out() << "(more alarms match: raise --limit, or page with --since-revision "
                    << response.alarms(response.alarms_size() - 1).revision() << ")\n";
    }
  }
  return kExitOk;
}

}  // namespace

std::vector<Command> AlarmCommands() {
  CommandSpec alarms;
  alarms.name = "alarms";
  alarms.synopsis =
      "[--run NAME] [--state firing|resolved] [--since-revision N] [--limit N]\n"
      "[--format table|json]";
  alarms.summary = "list the training-health alarms the server's rules fired, and their state";
  alarms.flags = {
      StringFlag("run", "NAME", "only this run's alarms (default: every run)"),
      ChoiceFlag("state", {"firing", "resolved"}, "only firing or only resolved alarms"),
      IntFlag("since-revision", "N",
              "only alarms fired or resolved after revision N (polling; each alarm carries its\n"
              "revision)",
              0),
      IntFlag("limit", "N", "at most N alarms (default 1000)", 1, 10000),
      ChoiceFlag("format", {"table", "json"},
                 "table (default): one row per alarm, oldest change first; json: one object\n"
                 "per alarm as the HTTP API's /api/v1/alarms writes it"),
  };
  alarms.details =
      "An alarm fires when a rule of the server's --alarm-rules holds at a stored step (one\n"
      "per rule and layer; LAYER all: over every layer) and resolves at the first later step\n"
      "where it no longer holds. docs/alarms.md says how rules are written.\n";
  return {{alarms, RunAlarms}};
}

}  // namespace anisoscope::client
