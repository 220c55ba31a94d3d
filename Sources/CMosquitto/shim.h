// libmosquitto (MQTT 3.1.1 and 5 client), for AccmonMQTT only.
#include <mosquitto.h>
#include <mqtt_protocol.h>
